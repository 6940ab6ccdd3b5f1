//! The task that drives one connection over any `AsyncRead + AsyncWrite`.
//!
//! ```text
//!            hello out, hello in            the owner closes, or a limit trips
//!  Connecting ─────────────────▶ Open ─────────────────────────────▶ Closing
//!      │  timeout / bad magic /    │  peer's close frame, EOF,           │ close frame flushed,
//!      │  other version            │  reset                              │ peer hangs up or
//!      ▼                           ▼                                     ▼ close_timeout
//!   Closed ◀──────────────────── Closed ◀──────────────────────────── Closed
//! ```
//!
//! The handshake (`greet`) is an `async fn`; the open connection is one
//! hand-written future (`open::Open`) whose reader and writer are polled side
//! by side, so a peer that stops reading blocks only our writer, never our
//! reader. The owner never waits on this task: it queues frames (bounded) and
//! drains events (bounded).

use switchboard_proto::connection::{ending, keepalive};
mod open;
mod reader;
mod tcp;
mod writer;

use open::Open;
use reader::{Readable, IDLE_READ_BUFFER};
use tcp::SharedTcp;
pub(crate) use tcp::TcpReader;

use std::collections::VecDeque;
use std::future::Future;
use std::io::ErrorKind;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::{timeout, Instant};
use tokio_util::codec::FramedRead;

use super::control::{self, CloseFrame};
use super::events::{Batch, Credit, Item, Wrap};
use super::handle::SocketHandle;
use super::outqueue::{Direct, Segment};
use crate::codec::{self, FrameDecoder};
use crate::message::Message;
use crate::PROTOCOL_VERSION;
use switchboard_proto::reason::{CloseCode, DisconnectReason, SocketError};

pub use switchboard_proto::connection::SocketEvent;

/// Asked after the handshake whether the peer may stay.
pub(crate) type RefuseHook = Box<dyn FnOnce() -> Option<DisconnectReason> + Send + Sync>;

/// Told why a handshake failed, instead of an event.
pub(crate) type HandshakeFailureHook = Box<dyn FnOnce(&DisconnectReason) + Send + Sync>;

/// Where the task sends its events, and what it does at the edges of its
/// life. The server uses the hooks to keep its peer table.
pub(crate) struct Reporter<E> {
    /// Events travel in batches: one queue operation for every frame that
    /// one read of the socket brought in.
    pub(crate) events: mpsc::Sender<Batch<E>>,
    pub(crate) wrap: Wrap<E>,
    /// The connection's share of a queue shared with others (a server's).
    pub(crate) credit: Option<Arc<Credit>>,
    pub(crate) on_open: Option<Box<dyn FnOnce() + Send + Sync>>,
    pub(crate) on_close: Option<Box<dyn FnOnce() + Send + Sync>>,
    /// Asked once the handshake is done: `Some` (the server has no room)
    /// means the peer is told that reason and closed, and no event is
    /// reported.
    pub(crate) refuse: Option<RefuseHook>,
    /// Called instead of reporting when the handshake fails and
    /// `report_handshake_failure` is false (a server does not announce the
    /// end of a peer it never announced).
    pub(crate) on_handshake_failure: Option<HandshakeFailureHook>,
}

impl Reporter<SocketEvent> {
    /// A client connection's: its events as they are, no hooks.
    pub(crate) fn client(events: mpsc::Sender<Batch<SocketEvent>>) -> Self {
        Self {
            events,
            wrap: Wrap::socket(),
            credit: None,
            on_open: None,
            on_close: None,
            refuse: None,
            on_handshake_failure: None,
        }
    }
}

impl<E> Reporter<E> {
    /// Delivers an event, waiting for room in the queue. `false` when the
    /// owner is gone.
    async fn report(&self, event: SocketEvent) -> bool {
        self.events
            .send(Batch::one(event, &self.wrap))
            .await
            .is_ok()
    }
}

type Reader<R> = FramedRead<R, Framed>;

/// The protocol crate's frame decoder as tokio-util's `FramedRead` drives it
/// (during the handshake; then the reader takes the decoder back).
#[derive(Debug)]
struct Framed(FrameDecoder);

impl tokio_util::codec::Decoder for Framed {
    type Item = codec::Frame;
    type Error = codec::FrameError;

    fn decode(
        &mut self,
        src: &mut bytes::BytesMut,
    ) -> Result<Option<codec::Frame>, codec::FrameError> {
        self.0.decode(src)
    }

    fn decode_eof(
        &mut self,
        src: &mut bytes::BytesMut,
    ) -> Result<Option<codec::Frame>, codec::FrameError> {
        self.0.decode_eof(src)
    }
}
type Writer<W> = W;

// The functions below are not `async fn`s: they return the future of
// `run_halves`, an `async` block, which uses what it captures in place where
// an `async fn` would keep a second copy of each argument (and of each
// caller's), for the connection's whole life.

/// Runs a connection from its handshake to its end.
pub(crate) fn run<S, E>(
    stream: S,
    handle: SocketHandle,
    reporter: Reporter<E>,
) -> impl Future<Output = ()>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
    E: Send + 'static,
{
    let (read_half, write_half) = tokio::io::split(stream);
    run_halves(read_half, write_half, handle, reporter)
}

/// Runs a connection over a TCP stream. Besides the writer, senders may
/// write to it directly while the writer has nothing to do (see
/// `SocketHandle::send_encoded`), which saves a task wake-up per message.
pub(crate) fn run_tcp<E: Send + 'static>(
    stream: tokio::net::TcpStream,
    handle: SocketHandle,
    reporter: Reporter<E>,
) -> impl Future<Output = ()> {
    let stream = std::sync::Arc::new(stream);
    handle.set_direct(Some(Direct::Tcp(stream.clone())));
    run_halves(
        SharedTcp(stream.clone()),
        SharedTcp(stream),
        handle,
        reporter,
    )
}

/// Runs a connection over a server's TLS session: as over TCP, senders
/// may encrypt and write directly while the writer has nothing to do.
pub(crate) fn run_tls<E: Send + 'static>(
    session: crate::tls::TlsStream,
    handle: SocketHandle,
    reporter: Reporter<E>,
) -> impl Future<Output = ()> {
    handle.set_direct(Some(Direct::Tls(session.clone())));
    run_halves(session.clone(), session, handle, reporter)
}

/// Runs a connection over a QUIC stream, with the connection's datagrams
/// read beside it (`quic::receive`: messages of sequenced channels) and
/// lent to the handle for sending them. The stream's task decides the
/// connection's life; its end closes the QUIC connection.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn would store its arguments twice in every connection's task"
)]
pub(crate) fn run_quic<R, W, E>(
    link: Arc<super::quic::Datagrams>,
    send: W,
    recv: R,
    handle: SocketHandle,
    reporter: Reporter<E>,
) -> impl Future<Output = ()>
where
    R: Readable,
    W: AsyncWrite + Unpin,
    E: Send + 'static,
{
    async move {
        handle.set_datagrams(link.clone());
        let datagrams = super::quic::receive(
            link.clone(),
            handle.clone(),
            reporter.events.clone(),
            reporter.wrap,
            reporter.credit.clone(),
        );
        let linger = handle.config().close_timeout;
        let stream = run_halves(recv, send, handle, reporter);
        tokio::select! {
            biased;
            () = stream => {}
            () = datagrams => {}
        }
        // Closing a QUIC connection drops what it has not yet delivered: a
        // server lets its client close first (the client has read the
        // server's last bytes by then), within `close_timeout`; a client
        // closes once its stream has ended.
        if !link.is_client() {
            let _ = timeout(linger, link.connection().closed()).await;
        }
        link.connection().close(0u32.into(), b"closed");
    }
}

/// Runs a connection over an upgraded WebSocket: the same task as TCP, over
/// byte halves that carry one frame per binary message.
pub(crate) fn run_ws<S, E>(
    ws: tokio_tungstenite::WebSocketStream<S>,
    handle: SocketHandle,
    reporter: Reporter<E>,
) -> impl Future<Output = ()>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    E: Send + 'static,
{
    run(super::websocket::FrameStream::new(ws), handle, reporter)
}

/// Runs a connection from its handshake to its end, over its two halves.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn would store its arguments twice in every connection's task"
)]
fn run_halves<R, W, E>(
    read_half: R,
    write_half: W,
    handle: SocketHandle,
    mut reporter: Reporter<E>,
) -> impl Future<Output = ()>
where
    R: Readable,
    W: AsyncWrite + Unpin,
    E: Send + 'static,
{
    async move {
        let Some((io, buffer, decoder, writer)) =
            greet(read_half, write_half, &handle, &mut reporter).await
        else {
            return;
        };
        let reason = Open::new(io, buffer, decoder, writer, &handle, &reporter).await;
        handle.set_direct(None);
        handle.set_closed();
        tracing::debug!(peer = ?handle.peer_addr(), %reason, "connection ended");
        if let Some(on_close) = reporter.on_close.take() {
            on_close();
        }
        Box::pin(reporter.report(SocketEvent::Disconnected(reason))).await;
    }
}

/// The handshake, the server's say on whether the peer may stay, and the
/// `Connected` event: the open connection's parts (the read half, what was
/// read past the hello, the decoder, the write half), or `None` when it
/// never opened (its owner has been told).
async fn greet<R, W, E>(
    read_half: R,
    mut writer: W,
    handle: &SocketHandle,
    reporter: &mut Reporter<E>,
) -> Option<(R, bytes::BytesMut, FrameDecoder, W)>
where
    R: Readable,
    W: AsyncWrite + Unpin,
{
    let config = handle.config();
    let decoder = FrameDecoder::new(control::hello_codec(&config.codec));
    // Small to start with: an idle connection should cost little (an open
    // connection reads into a buffer only while the peer speaks).
    let mut reader = FramedRead::with_capacity(read_half, Framed(decoder), IDLE_READ_BUFFER);
    let handshake = tokio::select! {
        result = handshake(&mut reader, &mut writer, config.handshake_timeout) => result,
        () = handle.shared.killed() => Err(kill_reason(handle)),
    };
    if let Err(reason) = handshake {
        send_close_now(&mut writer, &reason, config).await;
        tracing::debug!(peer = ?handle.peer_addr(), %reason, "handshake failed");
        never_opened(handle, reporter, reason).await;
        return None;
    }
    *reader.decoder_mut().0.config_mut() = config.codec.clone();
    if let Some(close) = control::close_behind_hello(reader.read_buffer(), &config.codec) {
        // Turned away (a busy server tells a client why at accept, its
        // close right behind its hello): the connection never opened, and
        // its owner hears why first (`SocketStream::until_admitted` comes
        // back after the retry-after).
        let reason = DisconnectReason::ClosedByPeer {
            code: close.code,
            reason: close.reason,
        };
        never_opened(handle, reporter, reason).await;
        return None;
    }
    if let Some(reason) = reporter.refuse.take().and_then(|refuse| refuse()) {
        send_close_now(&mut writer, &reason, config).await;
        handle.set_direct(None);
        handle.set_closed();
        return None;
    }
    handle.set_open();
    if let Some(on_open) = reporter.on_open.take() {
        on_open();
    }
    if !Box::pin(reporter.report(SocketEvent::Connected)).await {
        handle.close(CloseCode::NORMAL, "closed");
    }
    let parts = reader.into_parts();
    Some((parts.io, parts.read_buf, parts.codec.0, writer))
}

/// A connection that ended in its handshake: closed, and its owner told
/// why (or the server's hook, which counts it).
async fn never_opened<E>(
    handle: &SocketHandle,
    reporter: &mut Reporter<E>,
    reason: DisconnectReason,
) {
    handle.set_direct(None);
    handle.set_closed();
    match reporter.on_handshake_failure.take() {
        Some(hook) => hook(&reason),
        None => {
            Box::pin(reporter.report(SocketEvent::Disconnected(reason))).await;
        }
    }
}

fn kill_reason(handle: &SocketHandle) -> DisconnectReason {
    handle
        .shared
        .kill_reason
        .lock()
        .expect("kill_reason lock")
        .clone()
        .unwrap_or(DisconnectReason::Closed {
            code: CloseCode::NORMAL,
            reason: "closed".into(),
        })
}

async fn handshake<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    reader: &mut Reader<R>,
    writer: &mut Writer<W>,
    deadline: Duration,
) -> Result<(), DisconnectReason> {
    let lost = |err: std::io::Error| DisconnectReason::ConnectionLost(err.into());
    writer
        .write_all(&control::hello_frame(PROTOCOL_VERSION))
        .await
        .map_err(lost)?;
    writer.flush().await.map_err(lost)?;
    let first = match timeout(deadline, reader.next()).await {
        Err(_) => return Err(DisconnectReason::HandshakeTimeout),
        Ok(None) => return Err(ending::hung_up_in_handshake()),
        Ok(Some(Err(codec::FrameError::Io(err)))) => return Err(lost(err)),
        Ok(Some(first)) => first,
    };
    control::check_first_frame(first.as_ref())
}

/// Best effort: tell the peer why, within a short deadline, then let go.
async fn send_close_now<W: AsyncWrite + Unpin>(
    writer: &mut Writer<W>,
    reason: &DisconnectReason,
    config: &super::SocketConfig,
) {
    if matches!(
        reason,
        DisconnectReason::ConnectionLost(_) | DisconnectReason::ConnectFailed(_)
    ) {
        return;
    }
    let frame = control::close_frame(reason.close_code(), &reason.to_string(), &config.codec);
    let _ = timeout(config.close_timeout, async {
        writer.write_all(&frame).await?;
        writer.flush().await?;
        writer.shutdown().await
    })
    .await;
}

/// How the reader stopped.
enum ReadEnd {
    PeerClosed(CloseFrame),
    Eof,
    Failed(SocketError),
    OwnerGone,
}

/// How the writer stopped.
enum WriteEnd {
    /// Our close frame went out (graceful or not).
    SentClose,
    Failed(std::io::Error),
}
