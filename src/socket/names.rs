//! The older names of the socket layer's types.
//!
//! `ExtendedTcpSocket` and `ExtendedTcpServer` are the Qt-heritage names
//! (after `QTcpSocket` and `QTcpServer`) the project began with; they stay
//! as aliases. A [`Socket`](super::Socket) carries TCP, WebSocket and
//! join-code connections alike, and an [`Endpoint`](super::Endpoint) is the
//! listening end of them: the `Server*` names of the listening end's types
//! gave way to `Endpoint*`, so that `Server*` is the game server's alone
//! (`ServerBuilder`, `RunningServer`, `ServerStats`).
//!
//! ```no_run
//! use switchboard::{ExtendedTcpSocket, SocketConfig};
//! // The same type as `Socket`: code written with the Qt names runs as is.
//! let socket: switchboard::Socket =
//!     ExtendedTcpSocket::connect("127.0.0.1:7000", SocketConfig::default());
//! # drop(socket);
//! ```
#![allow(missing_docs)]

/// The Qt-heritage name of [`Socket`](super::Socket).
pub type ExtendedTcpSocket = super::Socket;

/// The Qt-heritage name of [`Endpoint`](super::Endpoint).
pub type ExtendedTcpServer = super::Endpoint;

#[deprecated(since = "0.1.0", note = "renamed `EndpointConfig` (docs/MIGRATING.md)")]
pub type ServerConfig = super::EndpointConfig;

#[deprecated(since = "0.1.0", note = "renamed `EndpointHandle` (docs/MIGRATING.md)")]
pub type ServerHandle = super::EndpointHandle;

#[deprecated(since = "0.1.0", note = "renamed `EndpointEvent` (docs/MIGRATING.md)")]
pub type ServerEvent = super::EndpointEvent;

#[deprecated(since = "0.1.0", note = "renamed `EndpointStream` (docs/MIGRATING.md)")]
pub type ServerStream = super::EndpointStream;
