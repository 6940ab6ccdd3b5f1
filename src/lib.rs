//! # Switchboard
//!
//! Networked games in the style of Qt's signals and slots. Every event (a
//! connection opened, a message received, a peer gone) is a [`Signal`] that
//! slots connect to. Network tasks never run game code: they queue events, and
//! the slots run when the game calls `poll()` once per frame, on its own
//! thread. tokio code takes the same events as a `Stream` instead.
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | [`signal`] | [`Signal`], [`Connection`]: connect, disconnect, emit on the owner's thread |
//! | [`codec`] | the frame format: length prefix, flag byte, zlib when it pays, bincode; every size limit. The only module that names `bincode` or `flate2` |
//! | [`message`] | the envelope [`Message`] `{channel, action, content}`; [`channels!`] and [`actions!`] for the application's enums |
//! | [`socket`] | one connection ([`ExtendedTcpSocket`]) and the listener ([`ExtendedTcpServer`]): handshake, reader and writer, bounded queues, keep-alive, close reasons |
//! | [`router`] | per-channel subscribers shared by clients and servers |
//! | [`session`] | client ids, reconnect tokens, grace periods, rate limits: state machines with time passed in |
//! | [`manager`] | [`ServerManager`]: hellos, sessions, requests validated by the game's [`GameLogic`], addressed updates, stats |
//! | [`client`] | [`NetworkClient`]: joins a server, subscribes per channel, sends requests, reconnects with its id and token |
//! | [`rooms`] | rooms, lobby and RPC for any game: `RoomsLogic` on the server, `RoomClient` with its signals |
//! | [`relay`] | the real-time relay (zones, stamped transforms, a JSON-lines listener), bots and the load tester |
//! | [`master`] | the master server that lists game servers, the announcer game servers run, the browser's list and ping |
//! | [`process`] | [`LocalServer`]: the server as a child process, with a ready line and parent-death exit |
//! | [`scenario`] | versioned, checksummed save files for a game's authoritative state |
//! | [`board`] | the built-in game of `switchboard-server`: a shared board, seats, chat |
//! | [`events`] | the bounded event queue between network tasks and `poll()` / streams |
//! | [`runtime`] | where network tasks run when the game has no tokio runtime |
//!
//! ## Example
//!
//! A server running the built-in board game, and a client that asks for a
//! seat and hears the answer, all driven by `poll()` on this thread:
//!
//! ```
//! use std::{cell::RefCell, rc::Rc, time::{Duration, Instant}};
//! use switchboard::board::{BoardAction, BoardChannel, BoardLogic, Seats};
//! use switchboard::{BindScope, ClientConfig, ManagerConfig, NetworkClient, RequestStatus, ServerManager};
//!
//! let server = ServerManager::spawn(BindScope::Loopback, 0, ManagerConfig::default(), BoardLogic::new(4))?;
//! let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
//!
//! let seats = Rc::new(RefCell::new(None));
//! let sink = seats.clone();
//! client.subscribe(BoardChannel::Board, move |delivery| {
//!     if delivery.action() == Some(BoardAction::Seats) {
//!         *sink.borrow_mut() = delivery.content::<Seats>().ok();
//!     }
//! }).detach();
//!
//! let ticket = client.request(BoardChannel::Board, BoardAction::Claim, &2u8)?;
//! let deadline = Instant::now() + Duration::from_secs(10);
//! while !ticket.is_done() && Instant::now() < deadline {
//!     client.poll_timeout(Duration::from_millis(10)); // slots run here
//! }
//! assert_eq!(ticket.status(), RequestStatus::Accepted);
//! let me = client.client_id().unwrap();
//! assert_eq!(seats.borrow().as_ref().unwrap().0.get(&2), Some(&me));
//! server.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod board;
pub mod client;
pub mod codec;
pub mod events;
pub mod manager;
pub mod master;
pub mod message;
pub mod process;
pub mod relay;
pub mod rooms;
pub mod router;
pub mod runtime;
pub mod scenario;
pub mod session;
pub mod signal;
pub mod socket;

pub use client::{
    ClientConfig, ClientError, ClientSignals, NetworkClient, ReconnectPolicy, RequestError,
    RequestStatus, RequestTicket, Welcomed,
};
pub use codec::{CodecConfig, ContentError, FrameError};
pub use manager::{
    Audience, GameLogic, ManagerConfig, ManagerHandle, Outbox, Rejection, Request, ServerManager,
};
pub use message::{Action, Channel, EncodedMessage, Message};
pub use process::{LocalServer, LocalServerOptions, ServerProgram};
pub use router::{Delivery, Router};
pub use session::ClientId;
pub use signal::{Connection, Signal};
pub use socket::{
    BindScope, CloseCode, DisconnectReason, ExtendedTcpServer, ExtendedTcpSocket, Incoming, PeerId,
    SendError, ServerConfig, ServerEvent, ServerHandle, ServerStream, SocketConfig, SocketError,
    SocketEvent, SocketHandle, SocketState, SocketStream,
};

/// The protocol version this build speaks; both ends must match.
pub const PROTOCOL_VERSION: u16 = 1;
