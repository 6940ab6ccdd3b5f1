//! The operator's admin HTTP server: what a Switchboard server is doing,
//! seen from outside its process, and the controls an operator needs.
//!
//! A server mode (the relay, the board game, the master, the rooms server)
//! implements [`AdminSource`]; [`AdminServer::spawn`] serves it:
//!
//! | route | what | token |
//! |---|---|---|
//! | `GET /` | the page: overview, chart, clients, controls (no data in it) | no |
//! | `GET /api/events` | the same, live: a `snapshot` server-sent event a second | on loopback: no; elsewhere: yes |
//! | `GET /api/overview` | mode, uptime, clients, counters | likewise |
//! | `GET /api/log?level=warn&q=text` | the mode's latest log lines, filtered | likewise |
//! | `GET /api/history?of=seconds\|minutes` | the last 10 minutes a point a second, or the last day a point a minute | likewise |
//! | `GET /api/clients` | every client: id, name, address, place, ... | likewise |
//! | `POST /api/clients/{id}/kick` | disconnects a client (JSON body `{"reason": "..."}`) | always |
//! | `POST /api/notice`, `POST` / `DELETE /api/bots` | a notice to every client; bots started, removed | always |
//! | `GET /metrics` | the counters in Prometheus' text format | likewise as reads |
//!
//! The token travels in a header (`Authorization: Bearer <token>`, never in
//! a URL) and is compared in constant time. Off unless asked; it binds
//! loopback by default, and binding elsewhere requires a token.
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | [`source`] | [`AdminSource`], [`Snapshot`], [`AdminClient`], [`Counter`]: what a mode reports |
//! | [`metrics`] | the Prometheus text format |
//! | [`history`] | [`History`](history::History): the last 10 minutes and the last day, kept on the server |
//! | [`server`] | [`AdminServer`], [`AdminConfig`]: the routes |
//! | `access` | who may read and control: the token, guesses slowed per address, the `Host` header |
//! | `listener` | the accept loop: connections capped in total and per address, header-read and idle timeouts |
//! | [`manager`] | [`ManagerAdmin`]: any `ServerManager` (the board game, a game's own server) as a source |
//! | `extra` | [`WithCounters`]: a source with counters its process adds (its calls to Redis) |

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod access;
mod extra;
pub mod history;
mod listener;
pub mod manager;
pub mod metrics;
mod recording;
pub mod server;
pub mod source;

pub use access::MIN_TOKEN_CHARS;
pub use extra::WithCounters;
pub use manager::ManagerAdmin;
pub use recording::{new_recording_path, start_recording_in};
pub use server::{AdminConfig, AdminError, AdminServer};
pub use source::{
    AdminClient, AdminPlace, AdminSource, Counter, CounterKind, LogLine, Snapshot, Traffic,
};
