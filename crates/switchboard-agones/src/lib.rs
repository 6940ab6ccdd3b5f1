//! Switchboard's dedicated servers on [Agones](https://agones.dev): a game
//! server tells its sidecar it is Ready once it listens, sends Health from
//! its own loop, learns it was Allocated to a match (and what the match
//! asked for), reports its players and rooms, and asks to Shutdown when the
//! match is over. On the official Rust SDK (`agones`).
//!
//! ```no_run
//! use switchboard_agones::{Agones, AgonesConfig, Event, Report};
//!
//! // Before the server's runtime starts: fails at once without a sidecar.
//! let agones = Agones::connect(AgonesConfig::default())?;
//! // ... once the server listens:
//! let running = agones.serve(
//!     || async { Some(Report::default()) }, // the server's own loop answers
//!     |event| match event {
//!         Event::Allocated(match_) => println!("allocated: {match_:?}"),
//!         Event::Shutdown => println!("the match is over"),
//!         Event::Failed(err) => eprintln!("{err}"),
//!         _ => {}
//!     },
//! );
//! # drop(running);
//! # Ok::<(), switchboard_agones::AgonesError>(())
//! ```
//!
//! # Layout
//!
//! - [`lifecycle`]: the rules without IO ([`Lifecycle`]): Health only when
//!   the server's probe answered, players into a List, a Counter or a
//!   label, Allocate on a first player, Shutdown when the game ended or the
//!   server stayed empty; tested in memory.
//! - `sdk` ([`Agones`]): the official SDK client driving those rules on a
//!   small runtime of its own: connect (a clear error without a sidecar),
//!   Ready, the health loop, WatchGameServer.
//! - `cli` ([`AgonesArgs`]): `--agones` and its options, one for every
//!   binary that serves on a fleet.
//! - [`allocator`]: the client of Agones's allocator service (gRPC over
//!   mutual TLS), for a matchmaker that asks for a game server per match.
//! - `fake` (feature `fake`): an SDK server and an allocator served from
//!   Agones's own protos over real gRPC, for tests without Kubernetes.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod allocator;
mod cli;
#[cfg(feature = "fake")]
pub mod fake;
pub mod lifecycle;
mod sdk;

use std::time::Duration;

pub use cli::AgonesArgs;
pub use lifecycle::{Action, Allocation, Lifecycle, Report};
pub use sdk::{Agones, Event, Running};

/// How a game server lives on Agones. The defaults are Agones's own
/// recommendations; `switchboard-server --agones` takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgonesConfig {
    /// The SDK server's gRPC port on localhost. `None` (the default): the
    /// `AGONES_SDK_GRPC_PORT` variable Agones sets, else 9357.
    pub port: Option<u16>,
    /// How long [`Agones::connect`] waits for the SDK server before it
    /// fails (default 30 s, the SDK's own: the sidecar may start after the
    /// game server).
    pub connect_timeout: Duration,
    /// How often the server is probed and, when it answers within the
    /// interval, Health is sent (default 2 s: the Fleet's
    /// `health.periodSeconds` should be at least twice this).
    pub health_interval: Duration,
    /// After the match began (allocated, or a first player joined), how
    /// long the server may stay without a player before it asks to shut
    /// down (default 60 s; `None`: only when the game ends).
    pub empty_shutdown_after: Option<Duration>,
}

impl Default for AgonesConfig {
    fn default() -> Self {
        Self {
            port: None,
            connect_timeout: Duration::from_secs(30),
            health_interval: Duration::from_secs(2),
            empty_shutdown_after: Some(Duration::from_secs(60)),
        }
    }
}

/// What went wrong between a game server and Agones.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgonesError {
    /// No SDK server answered: no sidecar (not on Agones), or the wrong port.
    #[error("no Agones SDK server answered on localhost:{port} within {timeout:?}: --agones needs the Agones sidecar (AGONES_SDK_GRPC_PORT gives its port); without Agones, leave --agones out")]
    Unreachable {
        /// The port tried.
        port: u16,
        /// How long it was tried.
        timeout: Duration,
    },
    /// `AGONES_SDK_GRPC_PORT` is not a port number.
    #[error("AGONES_SDK_GRPC_PORT={0:?} is not a port number")]
    BadPort(String),
    /// The SDK server answered a call with an error.
    #[error("the Agones SDK server refused {call}: {message}")]
    Refused {
        /// The call (`Ready`, `Shutdown`, ...).
        call: &'static str,
        /// What it said.
        message: String,
    },
    /// The allocator service could not be asked, or refused (its words).
    #[error("the Agones allocator: {0}")]
    Allocator(String),
    /// The fleet has no game server free for a new match.
    #[error("no game server free in the fleet; retry shortly")]
    NoServerFree,
    /// The client's own runtime could not start.
    #[error("the Agones client's runtime: {0}")]
    Runtime(#[from] std::io::Error),
}
