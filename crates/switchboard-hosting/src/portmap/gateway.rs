//! The gateway to ask, and this machine's address as the gateway sees it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

/// Why the default gateway could not be found ([`default_gateway`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoGateway {
    /// The routing table could not be read: what the system said.
    #[error("cannot read the routing table: {0}")]
    Unreadable(String),
    /// The table has no usable default route.
    #[error("no default gateway in the routing table")]
    NoDefaultRoute,
    /// This system's table is not read: give the gateway.
    #[error("the default gateway is not read on this system: give it (PortMapConfig::gateway, --gateway)")]
    Unsupported,
}

/// The default route's gateway, read from the system (`/proc/net/route`
/// on Linux). Elsewhere, or without a default route, the reason why not.
pub fn default_gateway() -> Result<IpAddr, NoGateway> {
    #[cfg(target_os = "linux")]
    {
        let table = std::fs::read_to_string("/proc/net/route")
            .map_err(|e| NoGateway::Unreadable(e.to_string()))?;
        parse_route_table(&table)
            .map(IpAddr::V4)
            .ok_or(NoGateway::NoDefaultRoute)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(NoGateway::Unsupported)
    }
}

/// The gateway of the first default route in a `/proc/net/route` table:
/// destination and mask 0, the gateway flag (0x2) set, addresses in hex in
/// the machine's own byte order.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_route_table(table: &str) -> Option<Ipv4Addr> {
    const RTF_UP: u32 = 0x1;
    const RTF_GATEWAY: u32 = 0x2;
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let hex = |i: usize| u32::from_str_radix(fields.get(i)?, 16).ok();
        let (destination, gateway, flags, mask) = (hex(1)?, hex(2)?, hex(3)?, hex(7)?);
        let default = destination == 0 && mask == 0;
        let usable = flags & RTF_UP != 0 && flags & RTF_GATEWAY != 0 && gateway != 0;
        (default && usable).then(|| Ipv4Addr::from(gateway.to_ne_bytes()))
    })
}

/// The local address this machine uses to reach `gateway`: what PCP must
/// name as its client and what UPnP forwards to. Found by connecting a UDP
/// socket (which sends nothing) and reading its address.
pub(super) fn local_address(gateway: IpAddr) -> Result<IpAddr, String> {
    let any: IpAddr = match gateway {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    };
    let socket = UdpSocket::bind(SocketAddr::new(any, 0))
        .and_then(|socket| socket.connect((gateway, 9)).map(|()| socket))
        .and_then(|socket| socket.local_addr())
        .map_err(|e| format!("no route to the gateway {gateway}: {e}"))?;
    Ok(socket.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_route_is_read_from_the_routing_table() {
        let table =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                     eth0\t0002A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                     eth0\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n";
        assert_eq!(
            parse_route_table(table),
            Some(Ipv4Addr::new(192, 168, 2, 1))
        );
    }

    #[test]
    fn a_table_without_a_default_route_has_no_gateway() {
        let table = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n\
                     eth0\t0002A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\n\
                     garbage line\n";
        assert_eq!(parse_route_table(table), None);
    }
}
