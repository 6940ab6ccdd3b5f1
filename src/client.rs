//! [`NetworkClient`]: one connection to a server, with per-channel
//! subscribers.

use std::time::Duration;

use serde::Serialize;
use tokio::net::ToSocketAddrs;

use crate::message::{Action, Channel, Message};
use crate::router::{Delivery, Router};
use crate::signal::Connection;
use crate::socket::{
    ExtendedTcpSocket, PeerId, SendError, SocketConfig, SocketEvent, SocketHandle, SocketSignals,
    SocketState,
};

/// A client of a Switchboard server: connect, subscribe slots to channels,
/// send, and call [`poll`](Self::poll) once per frame.
///
/// ```no_run
/// use switchboard::{NetworkClient, SocketConfig};
/// switchboard::channels! { pub enum Chan { Chat = 16 } }
/// switchboard::actions! { pub enum ChatAction { Say = 1 } }
///
/// let mut client = NetworkClient::connect("127.0.0.1:7000", SocketConfig::default());
/// let _chat = client.subscribe(Chan::Chat, |delivery| {
///     let text: String = delivery.content().unwrap_or_default();
///     println!("{}: {text}", delivery.sender);
/// });
/// client.send(Chan::Chat, ChatAction::Say, "hello")?;
/// loop {
///     client.poll();
///     # break;
/// }
/// # Ok::<(), switchboard::SendError>(())
/// ```
#[derive(Debug)]
pub struct NetworkClient {
    socket: ExtendedTcpSocket,
    router: Router,
}

impl NetworkClient {
    /// Starts connecting and returns at once; `connected` follows.
    pub fn connect<A>(addr: A, config: SocketConfig) -> Self
    where
        A: ToSocketAddrs + Send + 'static,
    {
        Self::from_socket(ExtendedTcpSocket::connect(addr, config))
    }

    /// A client over an existing socket (an in-memory pipe, say).
    pub fn from_socket(socket: ExtendedTcpSocket) -> Self {
        Self {
            socket,
            router: Router::new(),
        }
    }

    /// Connection-level signals: connected, received (every message, before
    /// the channel subscribers), disconnected, error.
    pub fn signals(&self) -> &SocketSignals {
        self.socket.signals()
    }

    /// Connects `slot` to every message on `channel`. Dropping the returned
    /// [`Connection`] unsubscribes it.
    pub fn subscribe<C: Channel>(
        &self,
        channel: C,
        slot: impl FnMut(&Delivery) + 'static,
    ) -> Connection {
        self.router.subscribe(channel, slot)
    }

    /// Removes every slot of `channel`.
    pub fn unsubscribe<C: Channel>(&self, channel: C) {
        self.router.unsubscribe(channel)
    }

    /// Messages that arrived on a channel without subscribers.
    pub fn unrouted(&self) -> u64 {
        self.router.unrouted()
    }

    /// Builds a message and queues it; never blocks.
    pub fn send<C: Channel, A: Action, T: Serialize + ?Sized>(
        &self,
        channel: C,
        action: A,
        content: &T,
    ) -> Result<(), SendError> {
        self.socket.send(&Message::new(channel, action, content)?)
    }

    /// Queues a message; never blocks.
    pub fn send_message(&self, message: &Message) -> Result<(), SendError> {
        self.socket.send(message)
    }

    /// A `Send` handle to the connection.
    pub fn handle(&self) -> SocketHandle {
        self.socket.handle()
    }

    /// Where the connection is in its life.
    pub fn state(&self) -> SocketState {
        self.socket.state()
    }

    /// Closes gracefully: queued messages go first.
    pub fn close(&self, reason: &str) {
        self.socket.close(reason)
    }

    /// Delivers queued events to signals and subscribers on this thread.
    pub fn poll(&mut self) -> usize {
        self.poll_timeout(Duration::ZERO)
    }

    /// Like [`poll`](Self::poll), but first waits up to `timeout` for an
    /// event if none is queued.
    pub fn poll_timeout(&mut self, timeout: Duration) -> usize {
        let mut delivered = 0;
        let mut wait = timeout;
        while let Some(event) = self.next_queued(wait) {
            wait = Duration::ZERO;
            delivered += 1;
            match event {
                SocketEvent::Received(message) => {
                    self.socket.signals().received.emit(&message);
                    self.router.route(PeerId::SERVER, message);
                }
                SocketEvent::Connected => self.socket.signals().connected.emit(&()),
                SocketEvent::Error(err) => self.socket.signals().error.emit(&err),
                SocketEvent::Disconnected(reason) => {
                    self.socket.signals().disconnected.emit(&reason)
                }
            }
        }
        delivered
    }

    fn next_queued(&mut self, wait: Duration) -> Option<SocketEvent> {
        self.socket.next_event_blocking(wait)
    }
}
