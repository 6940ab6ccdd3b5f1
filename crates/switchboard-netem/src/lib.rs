//! A real network in tests and by hand: kernel TCP and UDP through an
//! emulated link with delay, jitter, loss (random and in bursts),
//! duplication, a bandwidth limit with a bounded queue, and outages,
//! between two network namespaces made for it (`docs/NETEM.md`). Linux, as
//! root (or with `CAP_NET_ADMIN`).
//!
//! ```no_run
//! use switchboard_netem::{profile, Link, SERVER_ADDR};
//! let home = profile("home").unwrap();
//! let link = Link::start(home.clone(), home)?;
//! // A server in the server namespace, a client in the client namespace:
//! let server = link.server_command("switchboard-server").args(["--bind", "all"]).spawn()?;
//! let stream = link.in_client(|| std::net::TcpStream::connect((SERVER_ADDR, 7000)))??;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | `model` | [`Direction`], [`LinkConfig`]: what happens to each packet, time passed in (no IO) |
//! | `link` | [`Link`]: the namespaces, their TUN devices, the forwarder threads |
//! | `profile` | [`profile`], [`PROFILES`]: named links (home, Wi-Fi, mobile, transatlantic) |

#![warn(missing_docs)]

mod link;
mod model;
mod profile;

pub use link::{DirectionStats, Link, NetemError, CLIENT_ADDR, MAX_IN_FLIGHT, MTU, SERVER_ADDR};
pub use model::{Direction, Dropped, Fate, GilbertElliott, LinkConfig};
pub use profile::{profile, Profile, PROFILES};
