//! Asking the router to forward a port: PCP, then NAT-PMP, then UPnP IGD.
//!
//! [`map_port`] tries each [`Method`] of a [`PortMapConfig`] in turn, each
//! bounded by [`PortMapConfig::timeout`], and returns the first
//! [`Mapping`] a gateway grants, or a [`MapError`] that says why each one
//! failed. A mapping is a lease: renew it before [`Mapping::renew_in`]
//! passes, remove it when the game stops ([`crate::lease`] does both).

mod gateway;
mod pcp;
mod upnp;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

pub use gateway::{default_gateway, NoGateway};

/// A way of asking a router to forward a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Method {
    /// The Port Control Protocol (RFC 6887), UDP port 5351 of the gateway.
    Pcp,
    /// NAT Port Mapping Protocol (RFC 6886), PCP's predecessor, same port.
    NatPmp,
    /// UPnP Internet Gateway Device: an SSDP search, then SOAP over HTTP.
    Upnp,
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Method::Pcp => "PCP",
            Method::NatPmp => "NAT-PMP",
            Method::Upnp => "UPnP",
        })
    }
}

/// Which of a port's protocols is forwarded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Protocol {
    /// A TCP port: the game port, the WebSocket port.
    #[default]
    Tcp,
    /// A UDP port: the QUIC port.
    Udp,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
        })
    }
}

/// How a host asks for its port to be forwarded.
#[derive(Debug, Clone)]
pub struct PortMapConfig {
    /// Whether the port is TCP (default) or UDP.
    pub protocol: Protocol,
    /// The methods tried, in order; the first that works is kept.
    /// Default: PCP, NAT-PMP, UPnP (PCP's RFC asks clients to try it first).
    pub methods: Vec<Method>,
    /// The gateway PCP and NAT-PMP ask. Default `None`: the default route's
    /// gateway, read from the system (Linux); elsewhere, or without a
    /// default route, those two methods fail with that reason and UPnP,
    /// which finds its gateway by search, is still tried.
    pub gateway: Option<IpAddr>,
    /// Where the UPnP search goes. Default: SSDP's group,
    /// 239.255.255.250:1900 (tests point it at a fake gateway).
    pub upnp_search: SocketAddr,
    /// How long one method may take before the next is tried, and the
    /// bound on a renewal or a removal. Default 5 s: a UPnP router may
    /// wait up to 3 s before it answers the search (its `MX`), and the
    /// search has 60 % of this; PCP and NAT-PMP retry within it (250 ms,
    /// doubling). A router that refuses (most without the protocol: an
    /// ICMP refusal) costs nothing like it.
    pub timeout: Duration,
    /// The lease asked for. Default 1 hour; the gateway may grant less, and
    /// the mapping is renewed at half of what it grants. A mapping left
    /// behind by a host that crashed ends with its lease.
    pub lease: Duration,
    /// After every method failed, how long before they are all tried again
    /// (a router rebooting, UPnP turned on mid-game). Default 60 s.
    pub retry: Duration,
    /// The description a UPnP gateway shows in its table of mappings.
    /// Default "Switchboard game".
    pub description: String,
}

impl Default for PortMapConfig {
    fn default() -> Self {
        Self {
            protocol: Protocol::Tcp,
            methods: vec![Method::Pcp, Method::NatPmp, Method::Upnp],
            gateway: None,
            upnp_search: SocketAddr::new(Ipv4Addr::new(239, 255, 255, 250).into(), 1900),
            timeout: Duration::from_secs(5),
            lease: Duration::from_secs(3600),
            retry: Duration::from_secs(60),
            description: "Switchboard game".into(),
        }
    }
}

/// Every method failed: why each one did, in the order tried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct MapError {
    /// Each method tried and its reason, e.g. `(Pcp, "no answer from 192.168.1.1 within 2 s")`.
    pub attempts: Vec<(Method, String)>,
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.attempts.is_empty() {
            return f.write_str("no port mapping method to try");
        }
        f.write_str("no router forwarded the port: ")?;
        for (i, (method, why)) in self.attempts.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{method}: {why}")?;
        }
        Ok(())
    }
}

/// A port a gateway forwards to this machine, until its lease ends.
#[derive(Debug)]
pub struct Mapping {
    method: Method,
    external: SocketAddr,
    lease: Duration,
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    /// PCP or NAT-PMP (`crab_nat` keeps the nonce and the epoch).
    Crab(crab_nat::PortMapping),
    Upnp(upnp::UpnpMapping),
}

impl Mapping {
    /// The method that granted it.
    pub fn method(&self) -> Method {
        self.method
    }

    /// The address and port the internet reaches the game at.
    pub fn external(&self) -> SocketAddr {
        self.external
    }

    /// The lease the gateway granted; zero for a permanent one (some UPnP
    /// routers grant only those: it is removed on stop all the same).
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// When to renew: half the lease (at least a second), or `None` for a
    /// permanent mapping.
    pub fn renew_in(&self) -> Option<Duration> {
        (!self.lease.is_zero()).then(|| (self.lease / 2).max(Duration::from_secs(1)))
    }

    /// What a player reads: "reachable at 203.0.113.7:7100 through UPnP",
    /// with a warning when the router's own address is not a public one
    /// (a second router, or the provider's shared address, is in the way).
    pub fn describe(&self) -> String {
        let mut text = format!("reachable at {} through {}", self.external, self.method);
        if let Some(why) = not_public(self.external.ip()) {
            text.push_str(&format!(
                " (but {} is {why}: players on the internet may still not reach it)",
                self.external.ip()
            ));
        }
        text
    }

    /// Asks the gateway to extend the lease; bounded by `timeout`.
    pub async fn renew(&mut self, timeout: Duration) -> Result<(), GatewayError> {
        let renewed = match &mut self.inner {
            Inner::Crab(mapping) => {
                within(timeout, mapping.renew())
                    .await?
                    .map_err(|e| pcp::gateway_error(&e, timeout))?;
                Ok(Duration::from_secs(mapping.lifetime().into()))
            }
            Inner::Upnp(mapping) => bounded(timeout, mapping.renew()).await,
        }?;
        self.lease = renewed;
        Ok(())
    }

    /// Asks the gateway to remove the mapping; bounded by `timeout`.
    pub async fn remove(self, timeout: Duration) -> Result<(), GatewayError> {
        match self.inner {
            Inner::Crab(mapping) => within(timeout, mapping.try_drop())
                .await?
                .map_err(|(e, _)| pcp::gateway_error(&e, timeout)),
            Inner::Upnp(mapping) => bounded(timeout, mapping.remove()).await,
        }
    }
}

/// Tries each method of `config` in turn for the port `local_port` of this
/// machine (TCP or UDP: `config.protocol`), asking for the same port
/// outside.
pub async fn map_port(config: &PortMapConfig, local_port: u16) -> Result<Mapping, MapError> {
    let mut attempts = Vec::new();
    let Some(port) = std::num::NonZeroU16::new(local_port) else {
        attempts.extend(
            config
                .methods
                .iter()
                .map(|m| (*m, "port 0 cannot be mapped".into())),
        );
        return Err(MapError { attempts });
    };
    for &method in &config.methods {
        let tried = match method {
            Method::Upnp => bounded(config.timeout, upnp::map(config, port))
                .await
                .map_err(|why| why.to_string()),
            Method::Pcp | Method::NatPmp => match config.gateway.map_or_else(default_gateway, Ok) {
                Ok(gateway) => bounded(config.timeout, pcp::map(method, gateway, port, config))
                    .await
                    .map_err(|why| format!("{why} (gateway {gateway})")),
                Err(why) => Err(why.to_string()),
            },
        };
        match tried {
            Ok(mapping) => {
                tracing::info!(%method, external = %mapping.external, "port mapped");
                return Ok(mapping);
            }
            Err(why) => {
                tracing::debug!(%method, %why, "port mapping failed");
                attempts.push((method, why));
            }
        }
    }
    Err(MapError { attempts })
}

/// `work` within `timeout`, or "no answer within 2 s".
async fn bounded<T>(
    timeout: Duration,
    work: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, GatewayError> {
    within(timeout, work).await?.map_err(GatewayError::Refused)
}

/// `work`'s outcome, or [`GatewayError::NoAnswer`] past `timeout`.
async fn within<T>(
    timeout: Duration,
    work: impl std::future::Future<Output = T>,
) -> Result<T, GatewayError> {
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| GatewayError::NoAnswer(timeout))
}

/// Why a gateway did not do what it was asked (renew or remove a
/// mapping; each method's reason when mapping, in [`MapError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// Nothing came back in time.
    #[error("no answer within {}", seconds(*.0))]
    NoAnswer(Duration),
    /// It answered no, or could not be asked: why, in its words.
    #[error("{0}")]
    Refused(String),
}

/// "2 s", "0.5 s".
fn seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}

/// Why an external address is not one the internet can reach, if it is not.
fn not_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_private() {
                Some("a private address")
            } else if a == 100 && (64..128).contains(&b) {
                Some("the provider's shared address (carrier-grade NAT)")
            } else if v4.is_loopback() || v4.is_unspecified() || v4.is_link_local() {
                Some("not an internet address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            (v6.is_loopback() || v6.is_unspecified()).then_some("not an internet address")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_error_names_every_method_and_its_reason() {
        let error = MapError {
            attempts: vec![
                (Method::Pcp, "no answer within 2 s".into()),
                (
                    Method::Upnp,
                    "the gateway refused: 718 ConflictInMappingEntry".into(),
                ),
            ],
        };
        assert_eq!(
            error.to_string(),
            "no router forwarded the port: PCP: no answer within 2 s; UPnP: the gateway refused: 718 ConflictInMappingEntry"
        );
    }

    #[test]
    fn shared_and_private_external_addresses_are_flagged() {
        assert_eq!(not_public("203.0.113.7".parse().unwrap()), None);
        assert!(not_public("100.64.1.2".parse().unwrap())
            .unwrap()
            .contains("carrier-grade"));
        assert!(not_public("192.168.0.2".parse().unwrap())
            .unwrap()
            .contains("private"));
        assert_eq!(not_public("100.128.0.1".parse().unwrap()), None);
    }
}
