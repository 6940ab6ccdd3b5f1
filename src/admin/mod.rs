//! What a server reports to its operator, and what it lets the operator
//! do: the [`AdminSource`] each server mode implements (the board game and
//! any `ServerManager` through [`ManagerAdmin`], the relay, the master, the
//! rooms server, the matchmaker), with no HTTP in it. The admin page and
//! `/metrics` that serve a source are `switchboard-admin`'s; a server that
//! reports compiles no HTTP server.
//!
//! | module | owns |
//! |---|---|
//! | [`source`] | [`AdminSource`], [`Snapshot`], [`AdminClient`], [`Counter`]: what a mode reports |
//! | [`manager`] | [`ManagerAdmin`]: any `ServerManager` (the board game, a game's own server) as a source |
//! | `extra` | [`WithCounters`]: a source with counters its process adds (its calls to Redis) |
//! | `recording` | [`start_recording_in`], [`new_recording_path`]: a recording the operator starts, in a file the server names |

mod endpoint;
mod extra;
pub mod manager;
mod recording;
pub mod source;

pub use endpoint::endpoint_counters;
pub use extra::WithCounters;
pub use manager::ManagerAdmin;
pub use recording::{new_recording_path, start_recording_in};
pub use source::{
    AdminClient, AdminPlace, AdminSource, BoxFuture, Counter, CounterKind, LogLine, Snapshot,
    Traffic,
};
