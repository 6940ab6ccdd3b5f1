//! The accept loop of a listening server: the connection and handshake
//! limits, each peer's entry in the table, and its connection task.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use switchboard_proto::connection::control;
use switchboard_proto::reason::with_retry_after;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::connection::{self, Reporter, SocketEvent};
use super::events::{Batch, Credit, Origin, Wrap};
use super::first_step::{run_tls, run_websocket};
use super::listener::{Listener, ListenerLimits};
use super::server::{EndpointEvent, Incoming, PeerId, ServerShared};
use super::websocket::{self, Upgrade, UpgradeRules};
use super::{CloseCode, DisconnectReason, SocketHandle};
use switchboard_proto::limits::{address_key, ConnectionSlot, Turned};

/// A peer's connection event as the server reports it.
fn server_event(origin: Origin, event: SocketEvent) -> EndpointEvent {
    let Origin { peer, addr } = origin;
    match event {
        SocketEvent::Connected => EndpointEvent::PeerConnected { peer, addr },
        SocketEvent::Received(message) => EndpointEvent::Received(Incoming { peer, message }),
        SocketEvent::Error(error) => EndpointEvent::PeerError { peer, error },
        SocketEvent::Disconnected(reason) => EndpointEvent::PeerDisconnected { peer, reason },
    }
}

/// Takes a connection out of the gate when its task ends, however it ends.
struct Leave {
    shared: Arc<ServerShared>,
    ticket: u64,
}

impl Drop for Leave {
    fn drop(&mut self) {
        self.shared
            .gate
            .lock()
            .expect("gate lock")
            .ended(self.ticket);
        self.shared.room.notify_waiters();
    }
}

/// Waits until the gate may take a newcomer: its pending table has room,
/// or its oldest entry has had its grace. `false` if the server shut down
/// meanwhile.
pub(super) async fn room_in_gate(shared: &ServerShared) -> bool {
    loop {
        // Registered before looking, so that a place freed in between is
        // not missed.
        let freed = shared.room.notified();
        tokio::pin!(freed);
        freed.as_mut().enable();
        let Some(until) = shared
            .gate
            .lock()
            .expect("gate lock")
            .full_until(std::time::Instant::now())
        else {
            return true;
        };
        tokio::select! {
            _ = shared.shutdown.cancelled() => return false,
            () = freed => {}
            () = tokio::time::sleep_until(until.into()) => {}
        }
    }
}

/// What a listener's connections speak.
pub(super) enum Transport {
    /// Frames straight on TCP.
    Tcp,
    /// An HTTP upgrade to a WebSocket, then frames in binary messages.
    WebSocket(Arc<UpgradeRules>),
}

/// Accepts connections on `listener` until the server shuts down. A server
/// runs one loop per listener; they share its peer table and its limits.
pub(super) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<ServerShared>,
    events: mpsc::Sender<Batch<EndpointEvent>>,
    transport: Transport,
) {
    // Its gate admits (per-address caps under pressure, evictions, a
    // turned-away peer told why): the listener itself is uncapped.
    let name = match transport {
        Transport::Tcp => "game",
        Transport::WebSocket(_) => "game (WebSocket)",
    };
    let mut listener = Listener::new(
        listener,
        name,
        ListenerLimits::UNCAPPED,
        shared.shutdown.clone(),
    );
    while room_in_gate(&shared).await {
        let Some(arrival) = listener.next().await else {
            break;
        };
        let (stream, addr, _) = arrival.into_parts();
        let Admitted {
            handle,
            reporter,
            span,
            ..
        } = match admit(&shared, &events, addr) {
            Ok(admitted) => admitted,
            Err(turned) => {
                tell_turned_away(&shared, stream, addr, &transport, turned);
                continue;
            }
        };
        // Spawned apart, so that a TCP connection's task is no bigger for
        // the WebSocket upgrade it never does.
        match (&transport, &shared.tls) {
            (Transport::Tcp, None) => shared.tasks.spawn(tracing::Instrument::instrument(
                connection::run_tcp(stream, handle, reporter),
                span,
            )),
            (Transport::Tcp, Some(tls)) => shared.tasks.spawn(tracing::Instrument::instrument(
                run_tls(stream, addr, handle, reporter, tls.clone()),
                span,
            )),
            (Transport::WebSocket(ws), tls) => {
                handle.shared.websocket.store(true, Ordering::Relaxed);
                shared.tasks.spawn(tracing::Instrument::instrument(
                    run_websocket(stream, addr, handle, reporter, ws.clone(), tls.clone()),
                    span,
                ))
            }
        };
    }
    tracing::info!(addr = %shared.local_addr, "stopped accepting");
}

/// Runs a connection over `stream`, a peer at `addr` that reached the
/// server some other way (a compatibility listener's translated
/// connection): admitted through the same gate as the listeners' peers.
/// `None` when the server turned it away (its limits, or a shutdown).
pub(super) fn attach<S>(shared: &Arc<ServerShared>, stream: S, addr: SocketAddr) -> Option<PeerId>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    if shared.shutdown.is_cancelled() {
        return None;
    }
    let events = shared.events.upgrade()?;
    let admitted = admit(shared, &events, addr).ok()?;
    shared.tasks.spawn(tracing::Instrument::instrument(
        connection::run(stream, admitted.handle, admitted.reporter),
        admitted.span,
    ));
    Some(admitted.peer)
}

/// A connection let in: its id, handle, the reporter that keeps the peer
/// table and the gate up to date, and its span.
pub(super) struct Admitted {
    pub(super) peer: PeerId,
    pub(super) handle: SocketHandle,
    pub(super) reporter: Reporter<EndpointEvent>,
    pub(super) span: tracing::Span,
}

/// Why a connection was turned away at accept, and when it may come back.
#[derive(Debug, Clone, Copy)]
pub(super) struct TurnedAway {
    why: &'static str,
    retry_after: Duration,
}

impl TurnedAway {
    const INFLATE_BUDGET: TurnedAway = TurnedAway {
        why: "your address spent its inflate budget",
        retry_after: Duration::from_secs(5),
    };

    fn of(turned: Turned, config: &super::EndpointConfig) -> Self {
        match turned {
            Turned::PendingFromAddress => TurnedAway {
                why: "too many connections from your address at once while the server is busy",
                retry_after: config
                    .pending_handshake_grace
                    .max(Duration::from_millis(250))
                    * 2,
            },
            Turned::ConnectionsFromAddress => TurnedAway {
                why: "too many connections from your address while the server is crowded",
                retry_after: Duration::from_secs(5),
            },
            Turned::Full => TurnedAway {
                why: "server full",
                retry_after: Duration::from_secs(5),
            },
        }
    }
}

/// Tells a connection turned away at accept why, and when to come back:
/// a hello and a close frame (code `SERVER_FULL`, the reason ending with
/// its retry-after), over TCP without reading the peer, over WebSocket
/// inside the upgraded connection (every client, a browser's too, reads it
/// the same way); then the connection lingers until the peer hangs up, all
/// within `close_timeout`, so that the answer is not lost to a reset. At most `EndpointConfig::max_turned_away_told` are told at
/// once; past it a connection is closed without a word. Counted in the
/// server's refusals, and logged at INFO once per address every ten
/// minutes.
fn tell_turned_away(
    shared: &Arc<ServerShared>,
    mut stream: TcpStream,
    addr: SocketAddr,
    transport: &Transport,
    turned: TurnedAway,
) {
    let Some(Telling {
        place: telling,
        hello,
        close,
    }) = telling(shared, addr, turned)
    else {
        return;
    };
    let linger = shared.socket_config.close_timeout;
    let websocket = match transport {
        Transport::Tcp => None,
        Transport::WebSocket(ws) => Some(ws.clone()),
    };
    shared.tasks.spawn(async move {
        let _telling = telling;
        let told = async {
            match websocket {
                // A browser cannot read an HTTP status: it is told as over
                // TCP, inside the WebSocket (one frame a message).
                Some(rules) => {
                    if let Upgrade::WebSocket { mut ws, .. } =
                        websocket::accept_upgrade(stream, &rules).await?
                    {
                        use futures::SinkExt;
                        use tokio_tungstenite::tungstenite::Message as WsMessage;
                        ws.send(WsMessage::Binary(hello))
                            .await
                            .map_err(std::io::Error::other)?;
                        ws.send(WsMessage::Binary(close))
                            .await
                            .map_err(std::io::Error::other)?;
                        let _ = SinkExt::close(&mut *ws).await;
                    }
                }
                None => tell_plain(&mut stream, &[&hello[..], &close[..]].concat()).await?,
            }
            std::io::Result::Ok(())
        };
        let _ = tokio::time::timeout(linger, told).await;
    });
}

/// What tells a turned-away connection why: its place among those being
/// told, a hello and a close frame.
pub(super) struct Telling {
    pub(super) place: ConnectionSlot,
    pub(super) hello: bytes::Bytes,
    pub(super) close: bytes::Bytes,
}

/// Logs a connection turned away at accept (at INFO, once per address every
/// ten minutes) and, while fewer than `max_turned_away_told` are being
/// told, what tells it why: a close of code `SERVER_FULL` whose reason ends
/// with its retry-after. `None`: it is closed without a word.
pub(super) fn telling(
    shared: &ServerShared,
    addr: SocketAddr,
    turned: TurnedAway,
) -> Option<Telling> {
    if let Some(skipped) = shared
        .turned_away_log
        .lock()
        .expect("log limiter lock")
        .admit(addr.ip(), std::time::Instant::now())
    {
        tracing::info!(
            %addr,
            why = turned.why,
            retry_after_ms = turned.retry_after.as_millis() as u64,
            skipped,
            "connection turned away at accept (logged once per address every ten minutes)"
        );
    }
    let place = shared.turned_away_telling.take(addr.ip()).ok()?;
    let reason = with_retry_after(turned.why, turned.retry_after);
    let codec = &shared.socket_config.codec;
    Some(Telling {
        place,
        hello: control::hello_frame(crate::PROTOCOL_VERSION),
        close: control::close_frame(CloseCode::SERVER_FULL, &reason, codec),
    })
}

/// Writes `frames` to a plain peer and closes, reading and dropping what
/// the peer sent meanwhile (its hello) until it hangs up: a socket closed
/// with unread bytes is reset, and the peer would read the reset instead.
/// The caller bounds the time this takes.
pub(super) async fn tell_plain(stream: &mut TcpStream, frames: &[u8]) -> std::io::Result<()> {
    stream.write_all(frames).await?;
    stream.shutdown().await?;
    let mut sink = [0u8; 512];
    while stream.read(&mut sink).await? > 0 {}
    Ok(())
}

/// Lets a new connection from `addr` in, or says why not: the address's
/// inflate budget, then the gate's limits.
pub(super) fn admit(
    shared: &Arc<ServerShared>,
    events: &mpsc::Sender<Batch<EndpointEvent>>,
    addr: SocketAddr,
) -> Result<Admitted, TurnedAway> {
    let config = &shared.config;
    // An address that spent its inflate budget waits for half of it to
    // come back before it may connect again: reconnecting is not a way
    // around it, nor a cheap way to make the server accept and close.
    let now = std::time::Instant::now();
    let budget = shared
        .budgets
        .lock()
        .expect("budgets lock")
        .of(address_key(addr.ip()), now);
    if budget.lock().expect("budget lock").is_spent(now) {
        shared.refused.fetch_add(1, Ordering::Relaxed);
        return Err(TurnedAway::INFLATE_BUDGET);
    }
    let peer = PeerId(shared.next_peer.fetch_add(1, Ordering::Relaxed));
    let handle = SocketHandle::counted(
        shared.socket_config.clone(),
        Some(Arc::clone(&shared.traffic)),
    );
    let admitted =
        shared
            .gate
            .lock()
            .expect("gate lock")
            .admit(peer.0, addr.ip(), handle.clone(), now);
    match admitted {
        Err(turned) => {
            shared.refused.fetch_add(1, Ordering::Relaxed);
            return Err(TurnedAway::of(turned, config));
        }
        Ok(Some(evicted)) => {
            tracing::debug!(peer = ?evicted.peer_addr(), "oldest pending handshake evicted");
            evicted.kill(DisconnectReason::HandshakeTimeout);
        }
        Ok(None) => {}
    }
    handle.set_peer_addr(addr);
    *handle.shared.inflate.lock().expect("inflate lock") = Some(budget);
    let (open_shared, open_handle) = (shared.clone(), handle.clone());
    let refuse_shared = shared.clone();
    let close_shared = shared.clone();
    let failure_shared = shared.clone();
    let leave = Leave {
        shared: shared.clone(),
        ticket: peer.0,
    };
    let reporter = Reporter {
        events: events.clone(),
        wrap: Wrap::new(Origin { peer, addr }, server_event),
        credit: Some(Credit::new(config.max_queued_bytes_per_peer)),
        on_open: Some(Box::new(move || {
            let mut peers = open_shared.peers.write().expect("peer table lock");
            peers.insert(peer, open_handle.clone());
            drop(peers);
            // A shutdown that ran before this peer was in the table
            // missed it; close it now.
            if open_shared.shutdown.is_cancelled() {
                open_handle.close(CloseCode::GOING_AWAY, "server shutting down");
            }
        })),
        // Runs when the task ends, or is dropped with it: either way the
        // connection leaves the gate.
        on_close: Some(Box::new(move || {
            close_shared
                .peers
                .write()
                .expect("peer table lock")
                .remove(&peer);
            drop(leave);
        })),
        refuse: Some(Box::new(move || {
            let opened = refuse_shared.gate.lock().expect("gate lock").opened(peer.0);
            refuse_shared.room.notify_waiters();
            opened.err().map(|_| DisconnectReason::ServerFull)
        })),
        on_handshake_failure: Some(Box::new(move |reason| {
            failure_shared
                .handshake_failures
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%addr, %reason, "peer failed its handshake");
        })),
    };
    tracing::debug!(%peer, %addr, "accepted");
    let span = tracing::info_span!("connection", %peer, %addr);
    Ok(Admitted {
        peer,
        handle,
        reporter,
        span,
    })
}
