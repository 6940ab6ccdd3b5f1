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
//! | [`client`] | [`NetworkClient`]: a connection plus channel subscriptions |
//! | [`events`] | the bounded event queue between network tasks and `poll()` / streams |
//! | [`runtime`] | where network tasks run when the game has no tokio runtime |
//!
//! ## Example
//!
//! A server and a client on loopback, in one thread, driven by `poll()`:
//!
//! ```
//! use std::{cell::RefCell, rc::Rc, time::{Duration, Instant}};
//! use switchboard::{BindScope, ExtendedTcpServer, NetworkClient, ServerConfig, SocketConfig};
//!
//! switchboard::channels! { pub enum Chan { Chat = 16 } }
//! switchboard::actions! { pub enum Say { Line = 1 } }
//!
//! let mut server = ExtendedTcpServer::bind(BindScope::Loopback, 0, ServerConfig::default())?;
//! let handle = server.handle();
//! // The server echoes every chat line to everyone.
//! server.subscribe(Chan::Chat, move |delivery| {
//!     let _ = handle.broadcast(&delivery.message);
//! }).detach();
//!
//! let mut client = NetworkClient::connect(server.local_addr(), SocketConfig::default());
//! let heard = Rc::new(RefCell::new(None));
//! let sink = heard.clone();
//! client.subscribe(Chan::Chat, move |delivery| {
//!     *sink.borrow_mut() = delivery.content::<String>().ok();
//! }).detach();
//! client.send(Chan::Chat, Say::Line, "hello")?;
//!
//! let deadline = Instant::now() + Duration::from_secs(5);
//! while heard.borrow().is_none() && Instant::now() < deadline {
//!     server.poll();
//!     client.poll_timeout(Duration::from_millis(10));
//! }
//! assert_eq!(heard.borrow().as_deref(), Some("hello"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod board;
pub mod client;
pub mod codec;
pub mod events;
pub mod manager;
pub mod message;
pub mod router;
pub mod runtime;
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
pub use session::ClientId;
pub use router::{Delivery, Router};
pub use signal::{Connection, Signal};
pub use socket::{
    BindScope, CloseCode, DisconnectReason, ExtendedTcpServer, ExtendedTcpSocket, Incoming, PeerId,
    SendError, ServerConfig, ServerEvent, ServerHandle, ServerStream, SocketConfig, SocketError,
    SocketEvent, SocketHandle, SocketState, SocketStream,
};

/// The protocol version this build speaks; both ends must match.
pub const PROTOCOL_VERSION: u16 = 1;
