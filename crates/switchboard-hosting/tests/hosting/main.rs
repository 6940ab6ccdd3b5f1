//! Port mapping against fake PCP, NAT-PMP and UPnP gateways on loopback:
//! answers, refusals, leases renewed and removed, gateways that never
//! answer. No test needs the internet or a router.

mod fake_nat;
mod fake_upnp;
mod portmap;
