//! PCP and NAT-PMP through `crab_nat`: the requests, retries and parsing
//! are the crate's; here, the choice of method, the external address and
//! the words a player reads.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU16;
use std::time::Duration;

use crab_nat::{natpmp, pcp, InternetProtocol, PortMappingOptions, TimeoutConfig};

use super::{gateway, Inner, Mapping, Method, PortMapConfig, Protocol};

/// Maps `port` with `method` (PCP or NAT-PMP) on `gateway`.
pub(super) async fn map(
    method: Method,
    gateway: IpAddr,
    port: NonZeroU16,
    config: &PortMapConfig,
) -> Result<Mapping, String> {
    let options = PortMappingOptions {
        external_port: Some(port),
        lifetime_seconds: Some(config.lease.as_secs().clamp(1, u32::MAX.into()) as u32),
        timeout_config: Some(retries(config.timeout)),
    };
    let protocol = match config.protocol {
        Protocol::Tcp => InternetProtocol::Tcp,
        Protocol::Udp => InternetProtocol::Udp,
    };
    let (mapping, external_ip) = if method == Method::Pcp {
        let client = gateway::local_address(gateway)?;
        let request = pcp::BaseMapRequest::new(gateway, client, protocol, port);
        let mapping = pcp::port_mapping(request, None, None, options)
            .await
            .map_err(|e| match e {
                pcp::Failure::UnsupportedVersion(_) => {
                    format!("{gateway} does not speak PCP (it answered in an older version)")
                }
                e => plain(&crab_nat::MappingFailure::Pcp(e)),
            })?;
        let external_ip = match mapping.mapping_type() {
            crab_nat::PortMappingType::Pcp { external_ip, .. } => external_ip,
            crab_nat::PortMappingType::NatPmp => {
                return Err("the gateway answered PCP with a NAT-PMP mapping".into())
            }
        };
        (mapping, external_ip)
    } else {
        let mapping = natpmp::port_mapping(gateway, protocol, port, options)
            .await
            .map_err(|e| plain(&crab_nat::MappingFailure::NatPmp(e)))?;
        // NAT-PMP grants the port; the address is a question of its own.
        let external_ip = natpmp::external_address(gateway, Some(retries(config.timeout)))
            .await
            .map_err(|e| {
                format!(
                    "mapped, but the external address is unknown: {}",
                    plain(&crab_nat::MappingFailure::NatPmp(e))
                )
            })?;
        (mapping, IpAddr::V4(external_ip))
    };
    Ok(Mapping {
        method,
        external: SocketAddr::new(external_ip, mapping.external_port().get()),
        lease: Duration::from_secs(mapping.lifetime().into()),
        inner: Inner::Crab(mapping),
    })
}

/// Retries within `timeout`: 250 ms, doubling, as both RFCs ask of a
/// client (their own schedules run for minutes; a player waits seconds).
fn retries(timeout: Duration) -> TimeoutConfig {
    let initial = Duration::from_millis(250).min(timeout);
    let (mut next, mut spent, mut max_retries) = (initial * 2, initial, 0);
    while spent + next <= timeout {
        spent += next;
        next *= 2;
        max_retries += 1;
    }
    TimeoutConfig {
        initial_timeout: initial,
        max_retries,
        max_retry_timeout: None,
    }
}

/// A `crab_nat` failure in a player's words.
/// A failure to renew or remove: no answer within `timeout` (the client's
/// retries fit in it), or the gateway's refusal in plain words.
pub(super) fn gateway_error(
    failure: &crab_nat::MappingFailure,
    timeout: Duration,
) -> super::GatewayError {
    use crab_nat::MappingFailure as F;
    match failure {
        F::Pcp(pcp::Failure::Timeout) | F::NatPmp(natpmp::Failure::Timeout) => {
            super::GatewayError::NoAnswer(timeout)
        }
        _ => super::GatewayError::Refused(plain(failure)),
    }
}

pub(super) fn plain(failure: &crab_nat::MappingFailure) -> String {
    use crab_nat::MappingFailure as F;
    let refused = |e: &std::io::Error| e.kind() == std::io::ErrorKind::ConnectionRefused;
    match failure {
        F::Pcp(pcp::Failure::Timeout) | F::NatPmp(natpmp::Failure::Timeout) => {
            "the gateway did not answer".into()
        }
        F::Pcp(pcp::Failure::Socket(e)) | F::NatPmp(natpmp::Failure::Socket(e)) if refused(e) => {
            "nothing answers on the gateway's port 5351 (the router does not offer it)".into()
        }
        F::Pcp(pcp::Failure::NotAuthorized(_)) | F::NatPmp(natpmp::Failure::NotAuthorized) => {
            "the gateway refused: not authorized (port mapping is turned off in the router)".into()
        }
        F::Pcp(e) => format!("the gateway refused: {e}"),
        F::NatPmp(e) => format!("the gateway refused: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_fit_in_the_timeout() {
        let config = retries(Duration::from_secs(2));
        // 250 + 500 + 1000 ms: the next wait (2 s) would pass the bound.
        assert_eq!(config.initial_timeout, Duration::from_millis(250));
        assert_eq!(config.max_retries, 2);
        assert_eq!(retries(Duration::from_millis(100)).max_retries, 0);
    }
}
