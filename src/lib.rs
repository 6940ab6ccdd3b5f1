//! # Switchboard
//!
//! Networked games in the style of Qt's signals and slots. Every event (a
//! connection opened, a message received, a peer gone) is a [`Signal`] that
//! slots connect to. Network tasks never run game code: they queue events,
//! and the game takes each once per frame on its own thread: `drain()` hands
//! the events over as values, and as it does their signals and channel slots
//! run (`poll()` when slots are all the game uses). tokio code takes the
//! same events as a `Stream`.
//!
//! Messages are typed: `actions! { enum Act in Chan::Score { Add(u32) = 1 } }`
//! declares each action with its content's type; the client sends
//! `Act::Add(3)`, the server's [`GameLogic`] receives it decoded, and
//! anything else is answered by the framework before the game sees it.
//!
//! This is the core crate: transport, sessions, the server manager, the
//! client, the child-process server and save files. Rooms, the relay and
//! the master server are crates of their own on top of it
//! (`switchboard-rooms`, `switchboard-relay`, `switchboard-master`).
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | [`prelude`] | what a game needs in one `use switchboard::prelude::*;` |
//! | [`signal`] | [`Signal`], [`SlotHandle`](signal::SlotHandle), [`ScopedSlot`](signal::ScopedSlot): connect, disconnect, emit on the owner's thread |
//! | [`codec`] | (from `switchboard-proto`) the frame format: length prefix, flag byte, zlib when it pays, bincode; every size limit. The only module that names `bincode` or `flate2` |
//! | [`message`] | (from `switchboard-proto`) the envelope [`Message`] `{channel, action, content}`; [`channels!`], [`actions!`] (typed: each action with its content type) and [`messages!`] (typed enums of several channels) |
//! | [`socket`] | one connection ([`Socket`], [`SocketStream`]): the tokio driver of the connection rules of `switchboard_proto::connection` (the handshake, frames, ping and pong, close, the inflate budget: the same code `ConnectionCore` runs), its reader and writer, bounded queues (frames built straight onto them: `send_value`), the [`Pacer`](socket::Pacer) a busy server's writes go through; how a client's connection opens ([`Dialer`](socket::Dialer), [`Connector`](socket::Connector): `host:port`, `ws://`, and the address forms features plug in); the one accept loop of every server ([`Listener`](socket::Listener): caps in total and per address, pending handshakes, backoff, stop) and the one server-side WebSocket upgrade ([`accept_upgrade`](socket::accept_upgrade), [`UpgradeRules`](socket::UpgradeRules): head size, header count, origin, pages); the listening end of connections ([`Endpoint`], [`EndpointStream`], [`EndpointConfig::websocket`]; `ExtendedTcpSocket` and `ExtendedTcpServer` are the Qt-heritage aliases of [`Socket`] and [`Endpoint`]) admitting through the game server's gate (`switchboard_proto::limits::Gate`); `socket::quic`: the same connection over QUIC on quinn (one stream for the frames, sequenced channels as datagrams, Retry under load, a client's rebind), and `socket::quic::webtransport`: browsers on the same port over WebTransport (wtransport on our endpoint; short-lived certificates picked by ALPN and rotated, served to pages at `/webtransport` by [`WebTransportOffer`](socket::WebTransportOffer)) |
//! | [`tls`] | TLS 1.3 off this machine (rustls): a server's identity ([`ServerIdentity`](tls::ServerIdentity): PEM files, or made and kept in a data directory) and its [`Fingerprint`](tls::Fingerprint), how a listener speaks to other machines ([`TlsSettings`](tls::TlsSettings); [`accept`](tls::accept): TLS, plain from this machine, or plaintext refused), how a client trusts a server ([`ServerTrust`](tls::ServerTrust): roots, pins, known hosts) |
//! | [`token`] | (from `switchboard-proto`) connect tokens for fleets: sealed by a backend (XChaCha20-Poly1305), checked once each by a server that asks them (`ManagerConfig::connect_tokens`) |
//! | [`router`] | per-channel subscribers shared by clients and servers |
//! | [`session`] | client ids, reconnect tokens, grace periods, rate limits: state machines with time passed in; [`PlayerIds`](session::PlayerIds), the one place a server admits an id, whatever the connection's kind |
//! | [`manager`] | [`ManagerCore`](manager::ManagerCore) (from `switchboard-proto`: sessions, requests decoded into the game's type and validated by its [`GameLogic`], addressed updates; no IO) and [`ServerManager`], its tokio driver, started by one [`ServerBuilder`] (in process, dedicated, as a child) whose [`RunningServer`] gives the logic back at shutdown |
//! | [`client`] | [`ClientCore`](client::ClientCore) (from `switchboard-proto`: hello, welcome, reconnect with backoff and jitter, request verdicts; no IO) and [`NetworkClient`], its driver: one event path (`drain()`, `poll()`, `Stream`) with signals and channel slots run as events are taken |
//! | [`record`] | (from `switchboard-proto`) recordings of a server's session and their exact replay; `ManagerConfig::record` turns recording on, `ManagerHandle::start_recording` starts one mid-game (from a snapshot) |
//! | [`recorder`] | [`Recorder`](recorder::Recorder): the one writer of a recording file (a bounded queue, a thread, a batch or a second at a time, the end or why it stopped), for the manager's sessions and the relay's calls |
//! | [`spectate`] | a recording served live: spectators connect with the game's own client and watch one recorded player's view, paced as recorded |
//! | `harness` | (from `switchboard-proto`, feature `harness`) client cores and a manager core on an in-memory network with a clock the test moves; `harness::netsim`, a simulated link with a seed |
//! | [`smoothing`] | [`SnapshotBuffer`](smoothing::SnapshotBuffer): snapshots rendered interpolated at an adaptive delay; [`Predictor`](smoothing::Predictor): the player's own entity moved at once and reconciled (no IO) |
//! | [`admin`] | what a server reports to its operator ([`AdminSource`](admin::AdminSource): clients, counters, places, log; kick, notice, bots, recording), with no HTTP in it; [`ManagerAdmin`](admin::ManagerAdmin) for any `ServerManager`. `switchboard-admin` serves a source as the admin page and `/metrics` |
//! | [`lifecycle`] | how every server runs and stops: [`Running`](lifecycle::Running) (an awaitable `shutdown` that gives back what the server returns), [`StopHandle`](lifecycle::StopHandle), [`ServerError`] |
//! | [`process`] | [`LocalServer`]: the server as a child process, with a ready line and parent-death exit; the open-file limit raised at start and shared among a server's listeners |
//! | [`scenario`] | versioned, checksummed save files for a game's authoritative state |
//! | [`runtime`] | where network tasks run when the game has no tokio runtime |
//!
//! ## Example
//!
//! A complete game in pull style: a server whose rule is "numbers up to 10",
//! and a client that asks twice and reads the verdicts.
//!
//! ```
//! use std::time::Duration;
//! use switchboard::{ClientConfig, ClientId, GameLogic, NetworkClient};
//! use switchboard::{Outbox, Rejection, Request, RequestStatus, ServerManager};
//!
//! switchboard::channels! { enum Chan { Score = 16 } }
//! switchboard::actions! { enum Act in Chan::Score { Add(u32) = 1 } }
//!
//! struct Score(u32);
//! impl GameLogic for Score {
//!     type Message = Act;
//!     type Command = u32;
//!     fn validate(&self, request: &Request<Act>) -> Result<u32, Rejection> {
//!         let Act::Add(n) = request.message;
//!         (n <= 10).then_some(n).ok_or_else(|| Rejection::invalid("at most 10"))
//!     }
//!     fn apply(&mut self, _: ClientId, n: u32, _: &mut Outbox) {
//!         self.0 += n;
//!     }
//! }
//!
//! let server = ServerManager::builder(Score(0)).spawn()?;
//! let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
//! let wait = Duration::from_secs(10);
//! let ok = client.request(Act::Add(3))?;
//! let no = client.request(Act::Add(30))?;
//! assert_eq!(client.wait(ok, wait), RequestStatus::Accepted);
//! assert_eq!(client.wait(no, wait), RequestStatus::Rejected("at most 10".into()));
//! assert_eq!(server.shutdown_blocking()?.0, 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub use switchboard_proto::{actions, channels, framework_channel, messages};

pub mod admin;
pub mod client;
pub mod lifecycle;
pub use switchboard_proto::codec;
#[cfg(feature = "harness")]
pub use switchboard_proto::harness;
pub use switchboard_proto::histogram;
pub mod manager;
pub use switchboard_proto::message;
pub mod prelude;
pub mod process;
pub mod recorder;
pub use switchboard_proto::record;
pub use switchboard_proto::token;
pub mod router;
pub mod runtime;
pub mod scenario;
pub mod session;
pub mod signal;
pub mod smoothing;
pub mod socket;
pub mod spectate;
pub mod tls;

// What a game meets, at the root; the rest at its module's path
// (`switchboard::socket::SocketHandle`, `switchboard::signal::SlotHandle`).
pub use client::{
    ClientConfig, ClientError, ClientEvent, ClientSignals, NetworkClient, ReconnectPolicy,
    RequestError, RequestStatus, RequestTicket, Welcomed,
};
pub use manager::{
    Audience, GameLogic, ManagerConfig, ManagerHandle, ManagerRules, Outbox, Rejection, Request,
    RunningServer, ServerBuilder, ServerError, ServerManager, ServerStats,
};
pub use message::{Action, Channel, Message, TypedMessage};
pub use process::{LocalServer, LocalServerOptions};
pub use session::ClientId;
pub use signal::Signal;
pub use socket::{
    BindScope, CloseCode, DisconnectReason, Endpoint, EndpointConfig, EndpointEvent,
    EndpointStream, ExtendedTcpServer, ExtendedTcpSocket, PeerId, SendError, Socket, SocketConfig,
    SocketError, SocketEvent, SocketState, SocketStream, WebSocketConfig,
};
#[allow(deprecated)]
pub use socket::{ServerConfig, ServerEvent, ServerStream};

pub use switchboard_proto::PROTOCOL_VERSION;
