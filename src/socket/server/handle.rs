//! [`EndpointHandle`]: a listening server's peers, reached from any thread.

use super::*;

/// A cloneable, `Send` handle to a listening server: send to peers, close
/// them, shut the server down, from any thread.
#[derive(Clone)]
pub struct EndpointHandle {
    pub(super) shared: Arc<ServerShared>,
}

impl std::fmt::Debug for EndpointHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointHandle")
            .field("local_addr", &self.shared.local_addr)
            .field("peers", &self.peer_count())
            .finish()
    }
}

impl EndpointHandle {
    /// The address the server listens on (with the real port when bound to 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// The fingerprint of the certificate it presents to other machines
    /// (`None`: it speaks plain, bound to loopback or by the operator's
    /// choice). Players pin it (`--trust`).
    pub fn tls_fingerprint(&self) -> Option<crate::tls::Fingerprint> {
        self.shared.tls.as_ref().map(|tls| tls.fingerprint())
    }

    /// The TLS it speaks to other machines (`None`: plain), for a server's
    /// other listeners (a relay's JSON lines, the AxisPy port) to speak
    /// with the same identity.
    pub fn tls(&self) -> Option<crate::tls::TlsServer> {
        self.shared.tls.clone()
    }

    /// The address of the WebSocket listener, if the server has one
    /// ([`EndpointConfig::websocket`]); clients connect to
    /// `ws://<this address>/`.
    pub fn websocket_addr(&self) -> Option<SocketAddr> {
        self.shared.websocket_addr
    }

    /// The address of the QUIC port (UDP), if the server has one.
    pub fn quic_addr(&self) -> Option<SocketAddr> {
        self.shared.quic_addr
    }

    /// How a page reaches the QUIC port's WebTransport (`QuicConfig::webtransport`;
    /// `None` without it): its port and the hashes to trust.
    pub fn webtransport(&self) -> Option<crate::socket::WebTransportOffer> {
        self.shared.webtransport.clone()
    }

    /// The hashes a page passes as WebTransport's `serverCertificateHashes`
    /// to reach the QUIC port from a browser at `https://<quic_addr>/`: the
    /// certificate it serves now and the next (empty without WebTransport,
    /// or when it serves a certificate browsers trust). They change as the
    /// port rotates its certificates: read them when a page asks.
    pub fn webtransport_hashes(&self) -> Vec<crate::tls::Fingerprint> {
        self.shared
            .webtransport
            .as_ref()
            .map(|offer| offer.hashes())
            .unwrap_or_default()
    }

    /// QUIC clients sent a Retry to prove their address before a handshake
    /// (under load, or always: `QuicConfig::address_validation`).
    pub fn quic_retries(&self) -> u64 {
        self.shared.quic_retries.load(Ordering::Relaxed)
    }

    /// Runs a connection over `stream` as if the peer at `addr` had
    /// connected to a listener: the same handshake, limits (`addr`'s
    /// per-address ones included) and events. For compatibility listeners
    /// that translate another protocol into this one over an in-memory
    /// pipe (`tokio::io::duplex`). `None` when the server turned it away
    /// (its limits, or a shutdown); the stream is then dropped.
    pub fn attach<S>(&self, stream: S, addr: SocketAddr) -> Option<PeerId>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
    {
        crate::socket::accept::attach(&self.shared, stream, addr)
    }

    /// The traffic of every connection this server has had, those that
    /// ended included (frames and bytes in and out, as each connection's
    /// [`SocketHandle::stats`](crate::socket::SocketHandle::stats) counts
    /// them, system frames included; the queue and round-trip fields are
    /// 0). It only grows.
    pub fn traffic(&self) -> crate::socket::SocketStats {
        self.shared.traffic.traffic()
    }

    /// The server's settings.
    pub fn config(&self) -> &EndpointConfig {
        &self.shared.config
    }

    /// Peers whose handshake completed and that have not disconnected.
    pub fn peers(&self) -> Vec<PeerId> {
        let mut peers: Vec<PeerId> = self.read_peers().keys().copied().collect();
        peers.sort();
        peers
    }

    /// How many peers are connected.
    pub fn peer_count(&self) -> usize {
        self.read_peers().len()
    }

    /// The connection of one peer.
    pub fn peer(&self, peer: PeerId) -> Option<SocketHandle> {
        self.read_peers().get(&peer).cloned()
    }

    /// Connections refused at accept: too many pending handshakes or
    /// connections from their address.
    pub fn refused(&self) -> u64 {
        self.shared.refused.load(Ordering::Relaxed)
    }

    /// Connections dropped because their handshake failed (timeout, not a
    /// Switchboard peer, other protocol version).
    pub fn handshake_failures(&self) -> u64 {
        self.shared.handshake_failures.load(Ordering::Relaxed)
    }

    /// Encodes once for this server's codec settings.
    pub fn encode(&self, message: &Message) -> Result<EncodedMessage, SendError> {
        Ok(message.encode(&self.shared.config.socket.codec)?)
    }

    /// Queues a message (a typed one, or a built [`Message`]) for one peer.
    /// Never blocks.
    pub fn send_to(&self, peer: PeerId, message: &impl TypedMessage) -> Result<(), SendError> {
        self.send_message(peer, &message.to_message()?)
    }

    /// [`send_to`](Self::send_to) for a built message, without a copy.
    pub(crate) fn send_message(&self, peer: PeerId, message: &Message) -> Result<(), SendError> {
        match self.peer(peer) {
            Some(handle) => handle.send(message),
            None => Err(SendError::Closed),
        }
    }

    /// Builds a message of `channel`, `action` and `value` straight into a
    /// frame for one peer ([`SocketHandle::send_value`]). Never blocks.
    pub fn send_value_to<C: Channel, A: Action, T: serde::Serialize + ?Sized>(
        &self,
        peer: PeerId,
        channel: C,
        action: A,
        value: &T,
    ) -> Result<(), SendError> {
        match self.peer(peer) {
            Some(handle) => handle.send_value(channel, action, value),
            None => Err(SendError::Closed),
        }
    }

    /// Queues an encoded message for one peer. Never blocks.
    pub fn send_encoded_to(&self, peer: PeerId, message: &EncodedMessage) -> Result<(), SendError> {
        match self.peer(peer) {
            Some(handle) => handle.send_encoded(message),
            None => Err(SendError::Closed),
        }
    }

    /// Queues an encoded message for each of `peers` (one look-up of the peer
    /// table for all of them). Returns how many it was queued for; a peer
    /// that is gone or whose queue is full does not stop the others.
    pub fn send_encoded_to_many(
        &self,
        peers: impl IntoIterator<Item = PeerId>,
        message: &EncodedMessage,
    ) -> usize {
        self.count_peers(peers, |handle| handle.send_encoded(message).is_ok())
    }

    /// Queues an encoded message for each of `peers` without writing it
    /// (see [`SocketHandle::queue_encoded`]); [`flush_peers`](Self::flush_peers)
    /// sends it. Returns how many peers it was queued for.
    pub fn queue_encoded_to_many(
        &self,
        peers: impl IntoIterator<Item = PeerId>,
        message: &EncodedMessage,
    ) -> usize {
        self.count_peers(peers, |handle| handle.queue_encoded(message).is_ok())
    }

    /// Sends what was queued for each of `peers` with
    /// [`queue_encoded_to_many`](Self::queue_encoded_to_many): one write per
    /// peer (see [`SocketHandle::flush`]).
    pub fn flush_peers(&self, peers: impl IntoIterator<Item = PeerId>) {
        self.count_peers(peers, |handle| {
            handle.flush();
            true
        });
    }

    /// Runs `act` on each of `peers` still in the table, under one read of
    /// the table; counts the peers for which it returned true.
    fn count_peers(
        &self,
        peers: impl IntoIterator<Item = PeerId>,
        mut act: impl FnMut(&SocketHandle) -> bool,
    ) -> usize {
        let table = self.read_peers();
        peers
            .into_iter()
            .filter_map(|peer| table.get(&peer))
            .filter(|handle| act(handle))
            .count()
    }

    /// Encodes `message` once and queues the same bytes for every peer for
    /// which `filter` returns true. Returns how many peers it was queued for;
    /// a peer whose queue is full is disconnected as a slow consumer and does
    /// not stop the others.
    pub fn send_where(
        &self,
        message: &Message,
        mut filter: impl FnMut(PeerId) -> bool,
    ) -> Result<usize, SendError> {
        let encoded = self.encode(message)?;
        let targets: Vec<(PeerId, SocketHandle)> = self
            .read_peers()
            .iter()
            .filter(|(peer, _)| filter(**peer))
            .map(|(peer, handle)| (*peer, handle.clone()))
            .collect();
        let mut queued = 0;
        for (peer, handle) in targets {
            match handle.send_encoded(&encoded) {
                Ok(()) => queued += 1,
                Err(err) => tracing::debug!(%peer, %err, "broadcast skipped a peer"),
            }
        }
        Ok(queued)
    }

    /// Encodes `message` (a typed one, or a built [`Message`]) once and
    /// queues it for every peer.
    pub fn broadcast(&self, message: &impl TypedMessage) -> Result<usize, SendError> {
        self.send_where(&message.to_message()?, |_| true)
    }

    /// Closes one peer gracefully with a reason it will read.
    pub fn close_peer(&self, peer: PeerId, reason: &str) {
        self.close_peer_with(peer, CloseCode::NORMAL, reason);
    }

    /// Closes one peer gracefully with a code and a reason it will read.
    pub fn close_peer_with(&self, peer: PeerId, code: CloseCode, reason: &str) {
        if let Some(handle) = self.peer(peer) {
            handle.close(code, reason);
        }
    }

    /// Stops accepting and closes every peer gracefully: their queues are
    /// flushed, then they are told `reason`. Events keep arriving until every
    /// connection has ended; then the event stream ends.
    pub fn shutdown(&self, reason: &str) {
        if self.shared.shutdown.is_cancelled() {
            return;
        }
        self.shared.shutdown.cancel();
        self.shared.tasks.close();
        for handle in self.read_peers().values() {
            handle.close(CloseCode::GOING_AWAY, reason);
        }
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.shared.shutdown.is_cancelled()
    }

    /// Waits until every connection task has ended, at most `timeout`. The
    /// owner must keep draining events meanwhile. Returns whether all ended.
    pub async fn wait_closed(&self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.shared.tasks.wait())
            .await
            .is_ok()
    }

    fn read_peers(&self) -> std::sync::RwLockReadGuard<'_, PeerTable> {
        self.shared.peers.read().expect("peer table lock")
    }
}
