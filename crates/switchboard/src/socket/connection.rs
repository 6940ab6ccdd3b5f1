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

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::{timeout, Instant};
use tokio_util::codec::FramedRead;

use super::control::{self, CloseFrame, Hello};
use super::events::{Batch, Item, Wrap};
use super::handle::{Counters, Segment, SocketHandle};
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

/// Told why a handshake failed, instead of an event.
pub(crate) type HandshakeFailureHook = Box<dyn FnOnce(&DisconnectReason) + Send + Sync>;

/// Where the task sends its events, and what it does at the edges of its
/// life. The server uses the hooks to keep its peer table.
pub(crate) struct Reporter<E> {
    /// Events travel in batches: one queue operation for every frame that
    /// one read of the socket brought in.
    pub(crate) events: mpsc::Sender<Batch<E>>,
    pub(crate) wrap: Wrap<E>,
    pub(crate) on_open: Option<Box<dyn FnOnce() + Send + Sync>>,
    pub(crate) on_close: Option<Box<dyn FnOnce() + Send + Sync>>,
    /// Set when the server has no room: after the handshake the peer is told
    /// this and closed, and no event is reported.
    pub(crate) refuse: Option<DisconnectReason>,
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
    let config = handle.config().clone();
    let mut decoder = FrameDecoder::new(config.codec.clone());
    decoder.config_mut().max_frame_len = control::MAX_HELLO_FRAME_LEN;
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
        send_close_now(&mut writer, &reason, &config).await;
        tracing::debug!(peer = ?handle.peer_addr(), %reason, "handshake failed");
        handle.set_direct(None);
        handle.set_closed();
        match reporter.on_handshake_failure.take() {
            Some(hook) => hook(&reason),
            None => {
                reporter.report(SocketEvent::Disconnected(reason)).await;
            }
        }
        return;
    }
    reader.decoder_mut().config_mut().max_frame_len = config.codec.max_frame_len;
    if let Some(reason) = reporter.refuse.take() {
        send_close_now(&mut writer, &reason, &config).await;
        handle.set_direct(None);
        handle.set_closed();
        return;
    }
    handle.set_open();
    if let Some(on_open) = reporter.on_open.take() {
        on_open();
    }
    if !reporter.report(SocketEvent::Connected).await {
        handle.close(CloseCode::NORMAL, "closed");
    }
    let reason = run_open(reader, writer, &handle, &reporter).await;
    handle.set_direct(None);
    handle.set_closed();
    tracing::debug!(peer = ?handle.peer_addr(), %reason, "connection ended");
    if let Some(on_close) = reporter.on_close.take() {
        on_close();
    }
    reporter.report(SocketEvent::Disconnected(reason)).await;
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
                        reporter.report(SocketEvent::Error(err)).await;
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
                let mut next = now + config.keepalive_interval.min(config.idle_timeout);
                // Idle: nothing heard for `idle_timeout` while the reader
                // waited on the socket.
                let heard = clock.heard.load(Ordering::Relaxed);
                if heard != Clock::BUSY && !read_done {
                    let due = clock.at(heard) + config.idle_timeout;
                    if now >= due {
                        // The silent peer is not waited for: no lingering
                        // for it to hang up once our close frame is out.
                        read_done = true;
                        begin_close(&DisconnectReason::IdleTimeout, &mut deadline);
                        reason.get_or_insert(DisconnectReason::IdleTimeout);
                        continue;
                    }
                    next = next.min(due);
                }
                // Keep-alive: only a frame that went out (from the writer,
                // or written directly by a sender) puts the ping off.
                let mut sent = clock.at(clock.sent.load(Ordering::Relaxed));
                if let Some(at) = handle.outbound().last_direct {
                    sent = sent.max(Instant::from_std(at));
                }
                let due = sent + config.keepalive_interval;
                if now >= due {
                    handle.order(|out| out.ping = true);
                    clock.sent.store(clock.stamp(), Ordering::Relaxed);
                    next = next.min(now + config.keepalive_interval);
                } else {
                    next = next.min(due);
                }
                timer.as_mut().reset(next);
            }
        }
    }
}

/// The reason recorded for a close the owner asked for.
fn take_local_close(handle: &SocketHandle) -> DisconnectReason {
    kill_reason(handle)
}

/// Reads the socket itself (the framed reader of the handshake handed over
/// its stream and buffer): whole frames are taken straight from the buffer,
/// many per read.
async fn read_loop<R: AsyncRead + Unpin, E>(
    io: &mut R,
    buffer: &mut bytes::BytesMut,
    mut decoder: FrameDecoder,
    handle: &SocketHandle,
    reporter: &Reporter<E>,
    clock: &Clock,
) -> ReadEnd {
    let started = clock.started;
    loop {
        let mut batch = Read {
            items: Vec::new(),
            events: Vec::new(),
            frames: 0,
            bytes: 0,
        };
        let (taken, end) = take_frames(buffer, &mut decoder, &mut batch, handle, reporter, started);
        let chunk = buffer.split_to(taken).freeze();
        let counters = &handle.shared.counters;
        counters
            .frames_in
            .fetch_add(batch.frames, Ordering::Relaxed);
        counters.bytes_in.fetch_add(batch.bytes, Ordering::Relaxed);
        if batch.bytes > IDLE_READ_BUFFER as u64 / 2 {
            grow_read_buffer(buffer);
        }
        // Frames taken (system frames included): more may be buffered.
        let took_any = batch.frames > 0;
        if !batch.items.is_empty() {
            let batch = Batch::new(batch.items, batch.events, chunk, reporter.wrap);
            // Waiting for the owner is not the peer's silence.
            clock.heard.store(Clock::BUSY, Ordering::Relaxed);
            let sent = reporter.events.send(batch).await;
            clock.heard.store(clock.stamp(), Ordering::Relaxed);
            if sent.is_err() {
                return ReadEnd::OwnerGone;
            }
        }
        if let Some(end) = end {
            return end;
        }
        if took_any {
            // More whole frames may be buffered (a batch stops at its
            // limits): take them before reading.
            continue;
        }
        // Nothing whole is buffered: read. The connection's timer watches
        // for silence meanwhile.
        if buffer.capacity() - buffer.len() < MIN_READ_ROOM {
            buffer.reserve(IDLE_READ_BUFFER);
        }
        match io.read_buf(buffer).await {
            Ok(0) if buffer.is_empty() => return ReadEnd::Eof,
            Ok(0) => {
                let truncated = codec::FrameError::Truncated {
                    buffered: buffer.len(),
                };
                return ReadEnd::Failed(truncated.into());
            }
            Ok(_) => clock.heard.store(clock.stamp(), Ordering::Relaxed),
            Err(err) => return ReadEnd::Failed(codec::FrameError::Io(err).into()),
        }
    }
}

/// Room a read needs in the buffer at least, or the buffer is grown first.
const MIN_READ_ROOM: usize = 256;

/// Takes the whole frames at the start of `buffer` into `batch`, up to
/// BATCH events or BATCH_BYTES bytes (which bounds what the event queue can
/// hold). Uncompressed frames stay where they are: the batch will carry the
/// buffer's first `taken` bytes once and each message as a range of them. A
/// compressed frame is decoded on its own when it comes first, and otherwise
/// ends the batch; the next turn takes it. Returns `taken`, and how the
/// reader ends if a frame ends it.
fn take_frames<E>(
    buffer: &mut bytes::BytesMut,
    decoder: &mut FrameDecoder,
    batch: &mut Read<E>,
    handle: &SocketHandle,
    reporter: &Reporter<E>,
    started: Instant,
) -> (usize, Option<ReadEnd>) {
    use tokio_util::codec::Decoder;
    let mut taken = 0;
    while batch.items.len() < super::events::BATCH && batch.bytes < super::events::BATCH_BYTES {
        if let Some(len) = decoder.peek_raw(&buffer[taken..]) {
            if batch.items.capacity() == 0 {
                // Room for every frame the buffer may hold, once.
                batch
                    .items
                    .reserve((buffer.len() / 16).clamp(1, super::events::BATCH));
            }
            let payload = taken + codec::HEADER_LEN..taken + len;
            taken += len;
            batch.frames += 1;
            batch.bytes += len as u64;
            let end = on_raw_frame(&buffer[..], payload, batch, handle, reporter, started);
            if end.is_some() {
                return (taken, end);
            }
            continue;
        }
        if taken > 0 {
            break;
        }
        // The first frame is compressed, incomplete or bad: the decoder
        // takes it, asks for more bytes, or says what is wrong.
        let end = match decoder.decode(buffer) {
            Ok(Some(frame)) => on_frame(Some(Ok(frame)), batch, handle, reporter, started),
            Ok(None) => break,
            Err(err) => Some(ReadEnd::Failed(err.into())),
        };
        if end.is_some() {
            return (taken, end);
        }
    }
    (taken, None)
}

/// The events of one read, and what they weighed.
struct Read<E> {
    items: Vec<Item>,
    events: Vec<E>,
    frames: u64,
    bytes: u64,
}

impl<E> Read<E> {
    fn push_event(&mut self, event: E) {
        self.items.push(Item::Event);
        self.events.push(event);
    }
}

/// What a connection reads into until traffic arrives: an idle connection
/// costs little.
const IDLE_READ_BUFFER: usize = 1024;
/// What a connection with traffic reads into: big reads, few system calls.
const BUSY_READ_BUFFER: usize = 64 * 1024;

/// Swaps the small read buffer for a big one, once. A fresh buffer (not a
/// grown one) is needed: `BytesMut` keeps reallocating at the size it was
/// first created with.
fn grow_read_buffer(buffer: &mut bytes::BytesMut) {
    if buffer.capacity() >= BUSY_READ_BUFFER {
        return;
    }
    let mut big = bytes::BytesMut::with_capacity(BUSY_READ_BUFFER);
    big.extend_from_slice(buffer);
    *buffer = big;
}

/// Handles one read result: application messages and errors go into
/// `batch`, system messages are answered here. `Some` ends the reader.
fn on_frame<E>(
    next: Option<Result<codec::Frame, codec::FrameError>>,
    batch: &mut Read<E>,
    handle: &SocketHandle,
    reporter: &Reporter<E>,
    started: Instant,
) -> Option<ReadEnd> {
    let frame = match next {
        None => return Some(ReadEnd::Eof),
        Some(Err(err)) => return Some(ReadEnd::Failed(err.into())),
        Some(Ok(frame)) => frame,
    };
    batch.frames += 1;
    batch.bytes += frame.payload.len() as u64 + codec::HEADER_LEN as u64;
    let message = match Message::decode(frame.payload) {
        Ok(message) => message,
        Err(err) => return Some(ReadEnd::Failed(SocketError::Envelope(err))),
    };
    if !message.is_system() {
        batch.push_event(reporter.wrap.call(SocketEvent::Received(message)));
        return None;
    }
    on_system(message, batch, handle, reporter, started)
}

/// Handles an uncompressed frame whose payload is `buffer[payload]` (the
/// reader's fast path): an application message becomes a range of the
/// batch's buffer; a system message is copied out and handled here.
fn on_raw_frame<E>(
    buffer: &[u8],
    payload: std::ops::Range<usize>,
    batch: &mut Read<E>,
    handle: &SocketHandle,
    reporter: &Reporter<E>,
    started: Instant,
) -> Option<ReadEnd> {
    let (channel, action, used) = match crate::message::decode_envelope(&buffer[payload.clone()]) {
        Ok(envelope) => envelope,
        Err(err) => return Some(ReadEnd::Failed(SocketError::Envelope(err))),
    };
    let content = payload.start + used..payload.end;
    if channel != crate::message::SYSTEM_CHANNEL {
        // Offsets fit: a batch ends once it passes 256 KiB, and a frame's
        // length is a u32.
        batch.items.push(Item::Message {
            channel,
            action,
            start: content.start as u32,
            len: content.len() as u32,
        });
        return None;
    }
    let content = bytes::Bytes::copy_from_slice(&buffer[content]);
    let message = Message::from_raw(channel, action, content);
    on_system(message, batch, handle, reporter, started)
}

/// Answers a message on the system channel. `Some` ends the reader.
fn on_system<E>(
    message: Message,
    batch: &mut Read<E>,
    handle: &SocketHandle,
    reporter: &Reporter<E>,
    started: Instant,
) -> Option<ReadEnd> {
    match message.action_id() {
        control::ACTION_PING => {
            if let Ok(stamp) = message.content::<u64>() {
                // Only the latest ping needs its pong.
                handle.order(|out| out.pong = Some(stamp));
            }
        }
        control::ACTION_PONG => {
            if let Ok(stamp) = message.content::<u64>() {
                let now = started.elapsed().as_micros() as u64;
                handle
                    .shared
                    .counters
                    .rtt_micros
                    .store(now.saturating_sub(stamp), Ordering::Relaxed);
            }
        }
        control::ACTION_CLOSE => {
            let close = message.content::<CloseFrame>().unwrap_or(CloseFrame {
                code: CloseCode::PROTOCOL_ERROR,
                reason: "undecodable close frame".into(),
            });
            return Some(ReadEnd::PeerClosed(close));
        }
        other => {
            tracing::debug!(action = other, "unknown system action ignored");
            batch.push_event(
                reporter
                    .wrap
                    .call(SocketEvent::Error(SocketError::UnknownSystemAction(other))),
            );
        }
    }
    None
}

async fn write_loop<W: AsyncWrite + Unpin>(
    writer: &mut Writer<W>,
    handle: &SocketHandle,
    clock: &Clock,
) -> WriteEnd {
    let config = handle.config();
    let counters = &handle.shared.counters;
    let mut batch = VecDeque::new();
    // Allocated on first use: an idle connection never pays for it.
    let mut chunk = Vec::new();
    // Every frame this task writes is stamped on the clock: only real
    // writes put the next keep-alive ping off (senders' direct writes are
    // in the queue's `last_direct`).
    let sent = || clock.sent.store(clock.stamp(), Ordering::Relaxed);
    // Frames and bytes written since the queue's accounting last saw them.
    let mut written = (0usize, 0usize);
    // Frames and bytes in `batch`.
    let mut taken;
    loop {
        // Take the socket back from direct senders, and everything queued,
        // in one lock.
        let (close, close_now, pong, ping) = {
            let mut out = handle.outbound();
            out.writer_idle = false;
            // What the last batch wrote leaves the accounting here, in the
            // same lock.
            out.frames -= std::mem::take(&mut written.0);
            out.bytes -= std::mem::take(&mut written.1);
            taken = out.take_all(&mut batch);
            let close = if batch.is_empty() {
                out.close.take()
            } else {
                None
            };
            let ping = std::mem::take(&mut out.ping);
            (close, out.close_now.take(), out.pong.take(), ping)
        };
        // Orders that jump the queue: closes that cannot wait, pongs, pings.
        if let Some((code, reason)) = close_now {
            return close_with(writer, code, &reason, handle).await;
        }
        if let Some(stamp) = pong {
            let pong = control::pong_frame(stamp, &config.codec);
            if let Err(err) = write_frame(writer, counters, pong).await {
                return WriteEnd::Failed(err);
            }
            sent();
        }
        if ping {
            let ping = control::ping_frame(clock.stamp(), &config.codec);
            if let Err(err) = write_frame(writer, counters, ping).await {
                return WriteEnd::Failed(err);
            }
            sent();
        }
        if let Some((code, reason)) = close {
            return close_with(writer, code, &reason, handle).await;
        }
        if batch.is_empty() {
            // Before paying for a system call, give senders on this runtime
            // one turn to add to the queue: bursts then leave in one write.
            tokio::task::yield_now().await;
            if !handle.outbound().is_empty() {
                continue;
            }
            if let Err(err) = writer.flush().await {
                return WriteEnd::Failed(err);
            }
            {
                // Everything is written: lend the socket to senders, who may
                // now write a frame themselves instead of waking this task.
                let mut out = handle.outbound();
                if !out.is_empty() || out.has_orders() {
                    continue;
                }
                out.writer_idle = true;
            }
            // Senders, orders (pongs, pings, closes) and closes wake us.
            handle.shared.wake.notified().await;
            continue;
        }
        let (frames, bytes) = taken;
        if let Err(err) = write_batch(writer, &mut batch, &mut chunk).await {
            return WriteEnd::Failed(err);
        }
        sent();
        counters.wrote(frames, bytes);
        written = (frames, bytes);
    }
}

/// Small segments are copied into one buffer of up to this many bytes and
/// written together; larger ones are written as they are.
const CHUNK: usize = 64 * 1024;
/// A segment at least this long is written as it is, not copied.
const WRITE_AS_IS: usize = 8 * 1024;

/// Writes a batch of segments, coalescing small ones into `chunk`.
async fn write_batch<W: AsyncWrite + Unpin>(
    writer: &mut Writer<W>,
    batch: &mut VecDeque<Segment>,
    chunk: &mut Vec<u8>,
) -> std::io::Result<()> {
    for segment in batch.drain(..) {
        let bytes = segment.bytes;
        if !chunk.is_empty() && (chunk.len() + bytes.len() > CHUNK || bytes.len() >= WRITE_AS_IS) {
            writer.write_all(chunk).await?;
            chunk.clear();
        }
        if bytes.len() >= WRITE_AS_IS {
            writer.write_all(&bytes).await?;
        } else {
            chunk.extend_from_slice(&bytes);
        }
    }
    if !chunk.is_empty() {
        writer.write_all(chunk).await?;
        chunk.clear();
    }
    Ok(())
}

async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut Writer<W>,
    counters: &Counters,
    frame: Bytes,
) -> std::io::Result<usize> {
    writer.write_all(&frame).await?;
    counters.wrote(1, frame.len());
    Ok(frame.len())
}

async fn close_with<W: AsyncWrite + Unpin>(
    writer: &mut Writer<W>,
    code: CloseCode,
    reason: &str,
    handle: &SocketHandle,
) -> WriteEnd {
    {
        let mut slot = handle.shared.kill_reason.lock().expect("kill_reason lock");
        slot.get_or_insert_with(|| DisconnectReason::Closed {
            code,
            reason: reason.to_string(),
        });
    }
    let frame = control::close_frame(code, reason, &handle.config().codec);
    let result = async {
        writer.write_all(&frame).await?;
        writer.flush().await?;
        writer.shutdown().await
    }
    .await;
    match result {
        Ok(()) => WriteEnd::SentClose,
        Err(err) => WriteEnd::Failed(err),
    }
}

/// One half of a TCP stream shared with the senders' direct writes: reads
/// and writes go through `&TcpStream`, so the reader, the writer task and a
/// sender can each hold one.
struct SharedTcp(std::sync::Arc<tokio::net::TcpStream>);

impl AsyncRead for SharedTcp {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        loop {
            std::task::ready!(self.0.poll_read_ready(cx))?;
            match self.0.try_read_buf(buf) {
                Ok(_) => return std::task::Poll::Ready(Ok(())),
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(err) => return std::task::Poll::Ready(Err(err)),
            }
        }
    }
}

impl AsyncWrite for SharedTcp {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        loop {
            std::task::ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write(buf) {
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
                result => return std::task::Poll::Ready(result),
            }
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let socket = socket2::SockRef::from(&*self.0);
        std::task::Poll::Ready(socket.shutdown(std::net::Shutdown::Write))
    }
}
