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
//! The reader and the writer are two futures polled by the same task, so a
//! peer that stops reading blocks only our writer, never our reader. The owner
//! never waits on this task: it queues frames (bounded) and drains events
//! (bounded).

mod keepalive;
mod reader;
mod tcp;
mod writer;

use reader::{read_loop, IDLE_READ_BUFFER};
use tcp::SharedTcp;
use writer::write_loop;

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::{timeout, Instant};
use tokio_util::codec::FramedRead;

use super::control::{self, CloseFrame, Hello};
use super::events::{Batch, Credit, Item, Wrap};
use super::handle::{Counters, SocketHandle};
use super::outqueue::Segment;
use super::reason::{CloseCode, DisconnectReason, IoFailure, SocketError};
use crate::codec::{self, FrameDecoder};
use crate::message::Message;
use crate::PROTOCOL_VERSION;

/// What the connection reports to its owner.
#[derive(Debug)]
#[non_exhaustive]
pub enum SocketEvent {
    /// The handshake completed; the connection is open.
    Connected,
    /// A message arrived.
    Received(Message),
    /// Something went wrong; if it ends the connection, `Disconnected` follows.
    Error(SocketError),
    /// The connection ended; always the last event.
    Disconnected(DisconnectReason),
}

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

type Reader<R> = FramedRead<R, FrameDecoder>;
type Writer<W> = W;

/// Runs a connection from its handshake to its end.
pub(crate) async fn run<S, E>(stream: S, handle: SocketHandle, reporter: Reporter<E>)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (read_half, write_half) = tokio::io::split(stream);
    run_halves(read_half, write_half, handle, reporter).await;
}

/// Runs a connection over a TCP stream. Besides the writer task, senders
/// may write to it directly while the writer has nothing to do (see
/// `SocketHandle::send_encoded`), which saves a task wake-up per message.
pub(crate) async fn run_tcp<E>(
    stream: tokio::net::TcpStream,
    handle: SocketHandle,
    reporter: Reporter<E>,
) {
    let stream = std::sync::Arc::new(stream);
    handle.set_direct(Some(stream.clone()));
    run_halves(
        SharedTcp(stream.clone()),
        SharedTcp(stream),
        handle,
        reporter,
    )
    .await;
}

/// Runs a connection over an upgraded WebSocket: the same task as TCP, over
/// byte halves that carry one frame per binary message.
pub(crate) async fn run_ws<S, E>(
    ws: tokio_tungstenite::WebSocketStream<S>,
    handle: SocketHandle,
    reporter: Reporter<E>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    run(super::websocket::FrameStream::new(ws), handle, reporter).await;
}

/// Runs a connection from its handshake to its end, over its two halves.
async fn run_halves<R, W, E>(
    read_half: R,
    write_half: W,
    handle: SocketHandle,
    mut reporter: Reporter<E>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let config = handle.config();
    let mut decoder = FrameDecoder::new(config.codec.clone());
    // The hello is a few bytes and never compressed: nothing bigger is read
    // or inflated before it.
    decoder.config_mut().max_frame_len = control::MAX_HELLO_FRAME_LEN;
    decoder.config_mut().max_decompressed_len = control::MAX_HELLO_FRAME_LEN;
    // Small to start with: an idle connection should cost little. The read
    // buffer is swapped for a big one when traffic comes. The writer has no
    // buffer: batches of data are gathered in `chunk` (allocated on first
    // use), control frames are written as they are.
    let mut reader = FramedRead::with_capacity(read_half, decoder, IDLE_READ_BUFFER);
    let mut writer = write_half;

    let handshake = tokio::select! {
        result = handshake(&mut reader, &mut writer, config.handshake_timeout) => result,
        _ = handle.shared.kill.cancelled() => Err(kill_reason(&handle)),
    };
    if let Err(reason) = handshake {
        send_close_now(&mut writer, &reason, config).await;
        tracing::debug!(peer = ?handle.peer_addr(), %reason, "handshake failed");
        handle.set_direct(None);
        handle.set_closed();
        match reporter.on_handshake_failure.take() {
            Some(hook) => hook(&reason),
            None => {
                Box::pin(reporter.report(SocketEvent::Disconnected(reason))).await;
            }
        }
        return;
    }
    *reader.decoder_mut().config_mut() = config.codec.clone();
    if let Some(reason) = reporter.refuse.take().and_then(|refuse| refuse()) {
        send_close_now(&mut writer, &reason, config).await;
        handle.set_direct(None);
        handle.set_closed();
        return;
    }
    handle.set_open();
    if let Some(on_open) = reporter.on_open.take() {
        on_open();
    }
    if !Box::pin(reporter.report(SocketEvent::Connected)).await {
        handle.close(CloseCode::NORMAL, "closed");
    }
    let reason = run_open(reader, writer, &handle, &reporter).await;
    handle.set_direct(None);
    handle.set_closed();
    tracing::debug!(peer = ?handle.peer_addr(), %reason, "connection ended");
    if let Some(on_close) = reporter.on_close.take() {
        on_close();
    }
    Box::pin(reporter.report(SocketEvent::Disconnected(reason))).await;
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
        Ok(None) => {
            return Err(DisconnectReason::ConnectionLost(IoFailure::new(
                ErrorKind::UnexpectedEof,
                "the peer hung up before its hello",
            )))
        }
        Ok(Some(Err(codec::FrameError::Io(err)))) => return Err(lost(err)),
        Ok(Some(Err(_))) => return Err(DisconnectReason::NotSwitchboard),
        Ok(Some(Ok(frame))) if frame.compressed => return Err(DisconnectReason::NotSwitchboard),
        Ok(Some(Ok(frame))) => frame,
    };
    match control::parse_hello(&first.payload) {
        Hello::Compatible => Ok(()),
        Hello::OtherVersion(theirs) => Err(DisconnectReason::VersionMismatch {
            ours: PROTOCOL_VERSION,
            theirs,
        }),
        Hello::NotSwitchboard => Err(DisconnectReason::NotSwitchboard),
    }
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

/// When the reader and the writer last dealt with the peer, in microseconds
/// since the connection opened: the one timer of the connection (keep-alive,
/// idle, closing) reads them.
struct Clock {
    started: Instant,
    /// Last heard from the peer; [`Clock::BUSY`] while the reader waits for
    /// the owner (time the owner takes is not the peer's silence).
    heard: AtomicU64,
    /// Last frame written by the writer task.
    sent: AtomicU64,
}

impl Clock {
    const BUSY: u64 = u64::MAX;

    fn stamp(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    fn at(&self, micros: u64) -> Instant {
        self.started + Duration::from_micros(micros)
    }
}

async fn run_open<R, W, E>(
    reader: Reader<R>,
    mut writer: Writer<W>,
    handle: &SocketHandle,
    reporter: &Reporter<E>,
) -> DisconnectReason
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let config = handle.config();
    let clock = Clock {
        started: Instant::now(),
        heard: AtomicU64::new(0),
        sent: AtomicU64::new(0),
    };
    let parts = reader.into_parts();
    let (mut io, mut buffer) = (parts.io, parts.read_buf);
    let read = read_loop(&mut io, &mut buffer, parts.codec, handle, reporter, &clock);
    let write = write_loop(&mut writer, handle, &clock);
    // One timer for the connection: the next keep-alive ping, the idle
    // deadline, or the end of a close, whichever comes first. Pushed back
    // lazily when it fires early.
    let timer = tokio::time::sleep(config.keepalive_interval.min(config.idle_timeout));
    tokio::pin!(read, write, timer);

    let mut reason: Option<DisconnectReason> = None;
    let mut deadline: Option<Instant> = None;
    let mut read_done = false;
    let mut write_done = false;
    let mut killed = false;
    let begin_close = |reason_now: &DisconnectReason, deadline: &mut Option<Instant>| {
        handle.order(|out| {
            out.close_now
                .get_or_insert((reason_now.close_code(), reason_now.to_string()));
        });
        deadline.get_or_insert_with(|| Instant::now() + config.close_timeout);
    };

    loop {
        if let Some(deadline) = deadline {
            if deadline < timer.deadline() {
                timer.as_mut().reset(deadline);
            }
        }
        tokio::select! {
            end = &mut read, if !read_done => {
                read_done = true;
                match end {
                    _ if write_done => {
                        // Our close frame is out and the peer hung up (or
                        // went wrong): done.
                        return reason.unwrap_or_else(|| take_local_close(handle));
                    }
                    ReadEnd::PeerClosed(close) => {
                        return reason.unwrap_or(DisconnectReason::ClosedByPeer {
                            code: close.code,
                            reason: close.reason,
                        });
                    }
                    ReadEnd::Eof => {
                        return reason.unwrap_or(DisconnectReason::ConnectionLost(IoFailure::new(
                            ErrorKind::UnexpectedEof,
                            "the peer hung up without a goodbye",
                        )));
                    }
                    ReadEnd::Failed(SocketError::Frame(codec::FrameError::Io(err))) => {
                        return reason.unwrap_or(DisconnectReason::ConnectionLost(err.into()));
                    }
                    ReadEnd::Failed(err) => {
                        let now = DisconnectReason::ProtocolError(err.to_string());
                        tracing::debug!(peer = ?handle.peer_addr(), %err, "protocol error");
                        // Rare: boxed, so that it does not widen every
                        // connection's task.
                        Box::pin(reporter.report(SocketEvent::Error(err))).await;
                        begin_close(&now, &mut deadline);
                        reason.get_or_insert(now);
                    }
                    ReadEnd::OwnerGone => {
                        let now = DisconnectReason::Closed {
                            code: CloseCode::NORMAL,
                            reason: "closed".into(),
                        };
                        handle.close(CloseCode::NORMAL, "closed");
                        deadline.get_or_insert_with(|| Instant::now() + config.close_timeout);
                        reason.get_or_insert(now);
                    }
                }
            }
            end = &mut write, if !write_done => {
                write_done = true;
                match end {
                    WriteEnd::SentClose => {
                        // Linger until the peer hangs up (the reader ends),
                        // so that closing with unread bytes does not reset
                        // the connection and lose our close frame on the way.
                        let local = take_local_close(handle);
                        reason.get_or_insert(local);
                        if read_done {
                            return reason.unwrap_or_else(|| take_local_close(handle));
                        }
                        deadline.get_or_insert_with(|| Instant::now() + config.close_timeout);
                    }
                    WriteEnd::Failed(err) => {
                        return reason.unwrap_or(DisconnectReason::ConnectionLost(err.into()));
                    }
                }
            }
            _ = handle.shared.kill.cancelled(), if !killed => {
                killed = true;
                let now = kill_reason(handle);
                begin_close(&now, &mut deadline);
                reason.get_or_insert(now);
            }
            _ = &mut timer => {
                let now = Instant::now();
                if let Some(deadline) = deadline {
                    if now >= deadline {
                        if write_done {
                            // Lingered long enough after our close frame.
                            return reason.unwrap_or_else(|| take_local_close(handle));
                        }
                        return reason.unwrap_or(DisconnectReason::ConnectionLost(IoFailure::new(ErrorKind::TimedOut, "close timed out")));
                    }
                    timer.as_mut().reset(deadline);
                    continue;
                }
                let heard = clock.heard.load(Ordering::Relaxed);
                let heard = (heard != Clock::BUSY && !read_done).then(|| clock.at(heard));
                // A frame that went out from the writer, or written
                // directly by a sender.
                let mut sent = clock.at(clock.sent.load(Ordering::Relaxed));
                if let Some(at) = handle.outbound().last_direct {
                    sent = sent.max(Instant::from_std(at));
                }
                let next = match keepalive::tick(now, heard, sent, config.keepalive_interval, config.idle_timeout) {
                    keepalive::Tick::Idle => {
                        // The silent peer is not waited for: no lingering
                        // for it to hang up once our close frame is out.
                        read_done = true;
                        begin_close(&DisconnectReason::IdleTimeout, &mut deadline);
                        reason.get_or_insert(DisconnectReason::IdleTimeout);
                        continue;
                    }
                    keepalive::Tick::Ping { next } => {
                        handle.order(|out| out.ping = true);
                        clock.sent.store(clock.stamp(), Ordering::Relaxed);
                        next
                    }
                    keepalive::Tick::Wait { next } => next,
                };
                timer.as_mut().reset(next);
            }
        }
    }
}

/// The reason recorded for a close the owner asked for.
fn take_local_close(handle: &SocketHandle) -> DisconnectReason {
    kill_reason(handle)
}
