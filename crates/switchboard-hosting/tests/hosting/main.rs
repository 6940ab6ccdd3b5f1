//! Port mapping against fake PCP, NAT-PMP and UPnP gateways on loopback:
//! answers, refusals, leases renewed and removed, gateways that never
//! answer; and the join-code relay with a real game server as its host.
//! No test needs the internet or a router.

mod fake_nat;
mod fake_upnp;
mod portmap;
mod rendezvous;
mod rendezvous_abuse;
mod rendezvous_tls;
