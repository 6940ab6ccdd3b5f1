//! A server's QUIC port: the accept loop, through the same gate as its TCP
//! and WebSocket ports, and each connection's first step (the QUIC
//! handshake and its stream) before the connection's own task.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::{webtransport, AddressValidation, Carrier, Datagrams, QuicConfig};
use crate::socket::accept::{admit, room_in_gate, telling, Admitted, Telling, TurnedAway};
use crate::socket::connection;
use crate::socket::events::Batch;
use crate::socket::first_step::fail;
use crate::socket::server::{EndpointEvent, ServerShared};
use crate::socket::DisconnectReason;

/// Accepts QUIC connections on `endpoint` until the server shuts down.
pub(in crate::socket) async fn accept_loop(
    endpoint: quinn::Endpoint,
    shared: Arc<ServerShared>,
    events: mpsc::Sender<Batch<EndpointEvent>>,
    config: QuicConfig,
) {
    let config = Arc::new(config);
    let addr = endpoint.local_addr().ok();
    while room_in_gate(&shared).await {
        let incoming = tokio::select! {
            () = shared.shutdown.cancelled() => break,
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => incoming,
                None => break,
            },
        };
        let peer = incoming.remote_address();
        if !incoming.remote_address_validated()
            && incoming.may_retry()
            && validate(&shared, &config)
        {
            // One Retry, smaller than the Initial it answers: a spoofed
            // source gets nothing more; a real client comes back with its
            // token (validated) and is let in below.
            retry(&shared, incoming);
            continue;
        }
        match admit(&shared, &events, peer) {
            Ok(admitted) => {
                let Admitted {
                    handle,
                    reporter,
                    span,
                    ..
                } = admitted;
                let run = run(incoming, handle, reporter, config.clone());
                shared
                    .tasks
                    .spawn(tracing::Instrument::instrument(run, span));
            }
            Err(turned) => tell_turned_away(&shared, incoming, turned, config.clone()),
        }
    }
    // Nothing new; the connections still open end with the server's own
    // close (their handles), and the endpoint with the last of them.
    endpoint.set_server_config(None);
    tracing::info!(?addr, "stopped accepting (QUIC)");
}

/// Sends a client a Retry: it comes back with a token that proves its
/// address.
fn retry(shared: &ServerShared, incoming: quinn::Incoming) {
    if incoming.retry().is_ok() {
        shared.quic_retries.fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether a client whose address is not yet validated proves it first.
fn validate(shared: &ServerShared, config: &QuicConfig) -> bool {
    match config.address_validation {
        AddressValidation::Always => true,
        AddressValidation::UnderLoad => shared.gate.lock().expect("gate lock").busy(),
    }
}

/// A connection whose handshake is done and whose stream the client opened.
enum Opened {
    /// A native client (ALPN `switchboard`).
    Quic(quinn::Connection, quinn::SendStream, quinn::RecvStream),
    /// A browser (ALPN `h3`): its WebTransport session and stream.
    WebTransport(
        wtransport::Connection,
        wtransport::SendStream,
        wtransport::RecvStream,
    ),
}

/// The QUIC handshake, and a browser's WebTransport session, up to the
/// client's stream.
async fn opening(incoming: quinn::Incoming, config: &QuicConfig) -> std::io::Result<Opened> {
    let mut connecting = incoming.accept()?;
    if let Some(web) = &config.webtransport {
        if webtransport::is_webtransport(&mut connecting).await {
            let (session, send, recv) =
                webtransport::open(connecting, &web.allowed_origins).await?;
            return Ok(Opened::WebTransport(session, send, recv));
        }
    }
    let connection = connecting.await?;
    let (send, recv) = connection.accept_bi().await?;
    Ok(Opened::Quic(connection, send, recv))
}

/// One connection: the QUIC handshake and the client's stream within the
/// handshake timeout (unless the gate evicts it first), then the
/// connection's task over the stream, its datagrams beside it.
async fn run(
    incoming: quinn::Incoming,
    handle: crate::socket::SocketHandle,
    reporter: connection::Reporter<EndpointEvent>,
    config: Arc<QuicConfig>,
) {
    let deadline = tokio::time::Instant::now() + handle.config().handshake_timeout;
    let opened = tokio::select! {
        opened = tokio::time::timeout_at(deadline, opening(incoming, &config)) => match opened {
            Ok(Ok(opened)) => Ok(opened),
            Ok(Err(err)) => Err(DisconnectReason::ConnectionLost(err.into())),
            Err(_) => Err(DisconnectReason::HandshakeTimeout),
        },
        // Evicted as the oldest pending handshake.
        () = handle.shared.killed() => Err(DisconnectReason::HandshakeTimeout),
    };
    let limit = Some(config.max_datagrams_per_second);
    match opened {
        Ok(Opened::Quic(quic, send, recv)) => {
            let link = Datagrams::new(Carrier::Quic(quic), None, limit);
            connection::run_quic(link, send, recv, handle, reporter).await;
        }
        Ok(Opened::WebTransport(session, send, recv)) => {
            let link = Datagrams::new(Carrier::WebTransport(session), None, limit);
            connection::run_quic(link, send, recv, handle, reporter).await;
        }
        Err(reason) => fail(&handle, reporter, reason),
    }
}

/// Tells a QUIC client turned away at accept why, as a TCP one is told (a
/// hello and a close frame on its stream; it lingers until the client
/// hangs up, within `close_timeout`). A client that has not proved its
/// address is sent a Retry first (telling costs a handshake, which a
/// spoofed source must not get); one with no place to tell it is refused
/// without a handshake.
fn tell_turned_away(
    shared: &Arc<ServerShared>,
    incoming: quinn::Incoming,
    turned: TurnedAway,
    config: Arc<QuicConfig>,
) {
    if !incoming.remote_address_validated() {
        if incoming.may_retry() {
            retry(shared, incoming);
        } else {
            incoming.refuse();
        }
        return;
    }
    let Some(Telling {
        place,
        hello,
        close,
    }) = telling(shared, incoming.remote_address(), turned)
    else {
        incoming.refuse();
        return;
    };
    let linger = shared.socket_config.close_timeout;
    shared.tasks.spawn(async move {
        let _place = place;
        let said = [&hello[..], &close[..]].concat();
        let told = async {
            match opening(incoming, &config).await? {
                Opened::Quic(quic, mut send, _recv) => {
                    say(&mut send, &said).await?;
                    quic.closed().await;
                }
                Opened::WebTransport(session, mut send, _recv) => {
                    say(&mut send, &said).await?;
                    session.closed().await;
                }
            }
            std::io::Result::Ok(())
        };
        let _ = tokio::time::timeout(linger, told).await;
    });
}

/// Writes `bytes` and the stream's end.
async fn say(send: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> std::io::Result<()> {
    send.write_all(bytes).await?;
    send.shutdown().await
}
