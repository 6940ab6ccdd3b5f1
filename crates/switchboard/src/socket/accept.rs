//! The accept loop of a listening server: the connection and handshake
//! limits, each peer's entry in the table, and its connection task.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};

use super::connection::{self, Reporter, SocketEvent};
use super::events::{Batch, Origin, Wrap};
use super::server::{Incoming, PeerId, ServerEvent, ServerShared};
use super::{CloseCode, DisconnectReason, SocketHandle};

/// A peer's connection event as the server reports it.
fn server_event(origin: Origin, event: SocketEvent) -> ServerEvent {
    let Origin { peer, addr } = origin;
    match event {
        SocketEvent::Connected => ServerEvent::PeerConnected { peer, addr },
        SocketEvent::Received(message) => ServerEvent::Received(Incoming { peer, message }),
        SocketEvent::Error(error) => ServerEvent::PeerError { peer, error },
        SocketEvent::Disconnected(reason) => ServerEvent::PeerDisconnected { peer, reason },
    }
}

pub(super) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<ServerShared>,
    events: mpsc::Sender<Batch<ServerEvent>>,
) {
    let config = &shared.config;
    let pending = Arc::new(Semaphore::new(config.max_pending_handshakes.max(1)));
    let slots = Arc::new(Semaphore::new(config.max_connections));
    loop {
        let (stream, addr) = tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: back off, go on.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(pending_permit) = pending.clone().try_acquire_owned() else {
            shared.refused.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%addr, "too many pending handshakes; connection dropped");
            continue;
        };
        let slot = slots.clone().try_acquire_owned().ok();
        let _ = stream.set_nodelay(true);
        let peer = PeerId(shared.next_peer.fetch_add(1, Ordering::Relaxed));
        let handle = SocketHandle::new(config.socket.clone());
        handle.set_peer_addr(addr);
        let refuse = slot.is_none().then_some(DisconnectReason::ServerFull);
        let (open_shared, open_handle) = (shared.clone(), handle.clone());
        let close_shared = shared.clone();
        let failure_shared = shared.clone();
        let reporter = Reporter {
            events: events.clone(),
            wrap: Wrap::new(Origin { peer, addr }, server_event),
            on_open: Some(Box::new(move || {
                drop(pending_permit);
                let mut peers = open_shared.peers.write().expect("peer table lock");
                peers.insert(peer, open_handle.clone());
                drop(peers);
                // A shutdown that ran before this peer was in the table
                // missed it; close it now.
                if open_shared.shutdown.is_cancelled() {
                    open_handle.close(CloseCode::GOING_AWAY, "server shutting down");
                }
            })),
            on_close: Some(Box::new(move || {
                close_shared
                    .peers
                    .write()
                    .expect("peer table lock")
                    .remove(&peer);
                drop(slot);
            })),
            refuse,
            on_handshake_failure: Some(Box::new(move |reason| {
                failure_shared
                    .handshake_failures
                    .fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%addr, %reason, "peer failed its handshake");
            })),
        };
        tracing::debug!(%peer, %addr, "accepted");
        let span = tracing::info_span!("connection", %peer, %addr);
        shared.tasks.spawn(tracing::Instrument::instrument(
            connection::run_tcp(stream, handle, reporter),
            span,
        ));
    }
    tracing::info!(addr = %shared.local_addr, "stopped accepting");
}
