//! The operator's admin HTTP server: what a Switchboard server is doing,
//! seen from outside its process, and the controls an operator needs.
//!
//! A server mode (the relay, the board game, the master, the rooms server)
//! implements [`AdminSource`] (in `switchboard::admin`, with no HTTP in it,
//! so a mode that reports compiles no HTTP server); an admin server serves
//! it, started as every server is, from a builder:
//! `AdminServer::builder(source).bind(scope).port(port).config(config).spawn()`
//! gives a [`RunningAdmin`] (`local_addr()`; dropping it stops it).
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
//! | [`source`], [`manager`] | (from `switchboard::admin`) [`AdminSource`], [`Snapshot`], [`AdminClient`], [`Counter`]: what a mode reports; [`ManagerAdmin`], [`WithCounters`] |
//! | [`metrics`] | the Prometheus text format |
//! | [`history`] | [`History`](history::History): the last 10 minutes and the last day, kept on the server |
//! | [`server`] | [`AdminServer`] and its [`AdminBuilder`], [`AdminHandle`], [`AdminConfig`]: the routes |
//! | `access` | who may read and control: the token, guesses slowed per address, the `Host` header |
//! | `listener` | the accept loop: connections capped in total and per address, header-read and idle timeouts |
//! | `routes` | the page, the live stream, the reads and the controls, each checking the caller's access |
//! | `recording` | the recording's status, start, stop and download routes |

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod access;
pub mod history;
mod listener;
pub mod metrics;
mod recording;
mod routes;
pub mod server;

pub use access::MIN_TOKEN_CHARS;
pub use server::{AdminBuilder, AdminConfig, AdminError, AdminHandle, AdminServer, RunningAdmin};
pub use switchboard::admin::{
    manager, new_recording_path, source, start_recording_in, AdminClient, AdminPlace, AdminSource,
    Counter, CounterKind, LogLine, ManagerAdmin, Snapshot, Traffic, WithCounters,
};
