//! UPnP IGD through `igd-next`: the SSDP search, the device description and
//! the SOAP calls are the crate's; here, what to do when a router says no
//! to the first request (a taken port, a router that grants only permanent
//! mappings).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU16;
use std::time::Duration;

use igd_next::aio::tokio::Tokio;
use igd_next::aio::Gateway;
use igd_next::{AddAnyPortError, AddPortError, PortMappingProtocol, SearchOptions};

use super::{gateway, Inner, Mapping, Method, PortMapConfig, Protocol};

/// A mapping on a UPnP gateway: what renewing and removing it need.
#[derive(Debug)]
pub(super) struct UpnpMapping {
    gateway: Gateway<Tokio>,
    local: SocketAddr,
    external_port: u16,
    protocol: PortMappingProtocol,
    /// Seconds asked for and granted; 0 for a permanent mapping.
    lease_secs: u32,
    description: String,
}

impl UpnpMapping {
    /// UPnP has no renewal: the same mapping is added again.
    pub(super) async fn renew(&mut self) -> Result<Duration, String> {
        self.gateway
            .add_port(
                self.protocol,
                self.external_port,
                self.local,
                self.lease_secs,
                &self.description,
            )
            .await
            .map_err(|e| format!("the gateway refused to renew: {e}"))?;
        Ok(Duration::from_secs(self.lease_secs.into()))
    }

    pub(super) async fn remove(self) -> Result<(), String> {
        self.gateway
            .remove_port(self.protocol, self.external_port)
            .await
            .map_err(|e| format!("the gateway refused to remove it: {e}"))
    }
}

/// Searches for a gateway and maps `port` on it, asking for the same port
/// outside, then for any port if that one is taken.
pub(super) async fn map(config: &PortMapConfig, port: NonZeroU16) -> Result<Mapping, String> {
    let search = config.upnp_search;
    // A search sent to a loopback address (a test's gateway) is sent from one.
    let bind_ip: IpAddr = if search.ip().is_loopback() {
        Ipv4Addr::LOCALHOST.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    // The search gets most of the method's time, the device's description
    // and the mapping the rest: a router that never answers is told as
    // such, not as the method's time running out.
    let searching = config.timeout.mul_f32(0.6);
    let gateway = igd_next::aio::tokio::search_gateway(SearchOptions {
        bind_addr: SocketAddr::new(bind_ip, 0),
        broadcast_address: search,
        timeout: Some(searching),
        single_search_timeout: Some(searching),
    })
    .await
    .map_err(|e| match e {
        igd_next::SearchError::NoResponseWithinTimeout => {
            "no gateway answered the search (UPnP is off in the router, or there is none)".into()
        }
        e => format!("the search failed: {e}"),
    })?;
    let local = SocketAddr::new(gateway::local_address(gateway.addr.ip())?, port.get());
    let mut lease_secs = config.lease.as_secs().clamp(1, u32::MAX.into()) as u32;
    let description = config.description.as_str();
    let mut external_port = port.get();
    let protocol = match config.protocol {
        Protocol::Tcp => PortMappingProtocol::TCP,
        Protocol::Udp => PortMappingProtocol::UDP,
    };
    let mut added = gateway
        .add_port(protocol, external_port, local, lease_secs, description)
        .await;
    if let Err(AddPortError::OnlyPermanentLeasesSupported) = added {
        // Older routers: permanent only. Removed on stop like the others.
        lease_secs = 0;
        added = gateway
            .add_port(protocol, external_port, local, 0, description)
            .await;
    }
    if let Err(AddPortError::PortInUse) = added {
        external_port = gateway
            .add_any_port(protocol, local, lease_secs, description)
            .await
            .map_err(|e| match e {
                AddAnyPortError::NoPortsAvailable => {
                    format!("port {port} is taken on the gateway and it has no other free")
                }
                e => format!("port {port} is taken on the gateway, and another: {e}"),
            })?;
        added = Ok(());
    }
    added.map_err(|e| format!("the gateway {} refused: {e}", gateway.addr.ip()))?;
    let external_ip = match gateway.get_external_ip().await {
        Ok(ip) => ip,
        Err(e) => {
            let why = format!("mapped, but the external address is unknown: {e}");
            let _ = gateway.remove_port(protocol, external_port).await;
            return Err(why);
        }
    };
    Ok(Mapping {
        method: Method::Upnp,
        external: SocketAddr::new(external_ip, external_port),
        lease: Duration::from_secs(lease_secs.into()),
        inner: Inner::Upnp(UpnpMapping {
            gateway,
            local,
            external_port,
            protocol,
            lease_secs,
            description: config.description.clone(),
        }),
    })
}
