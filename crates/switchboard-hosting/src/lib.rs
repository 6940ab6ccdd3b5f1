//! Hosting a Switchboard game from home: the router asked to forward the
//! game's port, or a public relay by join code when it will not.
//!
//! A player who hosts is almost always behind a home router: a friend on the
//! internet cannot reach the port the host listens on unless the router
//! forwards it. This crate asks the router to, the way routers understand:
//! PCP (RFC 6887), then NAT-PMP (RFC 6886), then UPnP IGD, learns the
//! address the internet sees, renews the lease before it ends and removes
//! the mapping when the host stops.
//!
//! The protocols themselves are the work of maintained crates (`crab_nat`
//! for PCP and NAT-PMP, `igd-next` for UPnP); this crate is the glue a game
//! needs: one call, one status a player can read, cleanup on every way out.
//!
//! # Layout
//!
//! | Module | Job |
//! |---|---|
//! | [`portmap`] | [`PortMapConfig`], [`map_port`] (one attempt, every method in turn), [`Mapping`] (renew, remove), [`MapError`] (why each method failed) |
//! | `portmap::gateway` | the default gateway and the local address the gateway sees |
//! | `portmap::pcp` | PCP and NAT-PMP through `crab_nat` |
//! | `portmap::upnp` | UPnP IGD through `igd-next` |
//! | [`rendezvous`] | the join-code relay: [`RendezvousServer`] (from its builder, as a [`RunningRendezvous`]) and its limits ([`RendezvousConfig`]); [`HostLink`], a host's side (a control connection out, a data connection per player, given to the game's server) |
//! | [`rendezvous::frames`] | the relay's own frames: a player's join, a host's registration, its code, incoming players, data connections (`docs/PROTOCOL.md` section 12) |
//! | `rendezvous::games` | codes, secrets, players waiting for their host, per-address counts, each code's pace |
//! | `rendezvous::serve` | what each connection says it is (a join, a host, a data connection) and what is done with it |
//! | `rendezvous::pipe` | a player's frames to its host and back, each bounded and paced; refusals a client reads |
//! | [`lease`] | [`PortLease`], on the caller's tokio runtime or on a thread of its own (for games without tokio): map, renew, remove on stop or drop; a [`MapStatus`] to show |
//!
//! # Example
//!
//! ```no_run
//! use switchboard_hosting::{PortLease, PortMapConfig};
//!
//! // The game listens on 7100 on every interface; ask the router to
//! // forward it, without blocking the game.
//! let mapper = PortLease::start_thread(PortMapConfig::default(), 7100);
//! // ... later, in the lobby:
//! println!("{}", mapper.wait_ready(std::time::Duration::from_secs(10)));
//! // "reachable at 203.0.113.7:7100 through UPnP" or why not.
//! mapper.stop_blocking(); // the mapping is removed (also when `mapper` is dropped)
//! ```
#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod lease;
pub mod portmap;
pub mod rendezvous;

pub use lease::{MapStatus, PortLease};
pub use portmap::{
    map_port, GatewayError, MapError, Mapping, Method, NoGateway, PortMapConfig, Protocol,
};
pub use rendezvous::{
    HostConfig, HostLink, HostStatus, HostTarget, JoinCodes, RendezvousBuilder, RendezvousConfig,
    RendezvousHandle, RendezvousServer, RendezvousStats, RunningRendezvous,
};
