//! [`ConnectionCore`]: one connection as a state machine without IO, for a
//! driver that is not tokio's (an engine's frame loop over a non-blocking
//! socket, a test, a replay).
//!
//! ```text
//!   driver                                         ConnectionCore
//!     wants_read()? read    ──handle_bytes(b, now)──▶  hello, frames, ping/pong, close
//!     peer hung up          ──handle_eof(now)───────▶
//!     the transport failed  ──handle_error(e)───────▶
//!     poll_timeout() passed ──handle_timeout(now)───▶  handshake deadline, keep-alive, idle
//!     bytes to write        ◀──poll_transmit()──────  (then shut down: should_shutdown())
//!     events for the owner  ◀──poll_event()─────────  Connected, Received, Error, Disconnected
//! ```
//!
//! ```text
//!             hello each way           close(), a broken rule, idle, slow consumer
//!  Handshake ───────────────▶ Open ───────────────────────────────────▶ closing
//!      │ timeout, not ours,      │ peer's close, EOF, a lost transport       │ close frame out, then
//!      │ other version           │                                           │ the peer's hang-up (or
//!      ▼                         ▼                                           ▼ close_timeout)
//!   Closed ◀─────────────────── Closed ◀───────────────────────────────── Closed
//! ```
//!
//! The rules are the tokio connection's, and shared with it: the hello's
//! limits and check ([`control`]), the frames of an open connection
//! ([`inbound`]: compressed system frames refused, the inflate budget, an
//! envelope error reported then closed, pongs coalesced), the keep-alive
//! and idle rule ([`keepalive`]: time the owner leaves its events waiting is
//! not the peer's silence), and the open connection's life, its close, the
//! linger and the end ([`Lifecycle`], which the tokio driver holds too). A
//! connection that fails tells the peer why (after our hello, if that had
//! not gone yet); the owner hears the end once that is written (or after
//! `close_timeout`), and the driver shuts the transport down.
//!
//! [`control`]: super::control
//! [`inbound`]: super::inbound
//! [`keepalive`]: super::keepalive

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use super::budget::{InflateBudget, SharedBudget};
use super::control;
use super::ending::{self, ReadEnd};
use super::keepalive::{self, Tick};
use super::lifecycle::{Lifecycle, Step};
use super::{SocketConfig, SocketEvent, SocketStats};
use crate::codec::FrameDecoder;
use crate::message::Message;
use crate::reason::{CloseCode, DisconnectReason, SendError, SocketError};
use crate::PROTOCOL_VERSION;

/// Where the connection is in its life.
#[derive(Debug)]
enum State {
    /// Our hello is queued; the peer's must arrive by `deadline`.
    Handshake { deadline: Instant },
    /// Open; its life after that (a close under way, the linger) is the
    /// protocol crate's one [`Lifecycle`], the tokio driver's too.
    Open(Lifecycle<Instant>),
    /// Ended (`Disconnected` is queued). What is still queued (a close
    /// frame telling a peer that failed its handshake why) may be written
    /// until `flush_by`.
    Closed { flush_by: Option<Instant> },
}

/// One connection's rules, with the bytes and the time passed in.
#[derive(Debug)]
pub struct ConnectionCore {
    config: SocketConfig,
    state: State,
    decoder: FrameDecoder,
    budget: SharedBudget,
    inbound: BytesMut,
    outbound: VecDeque<Bytes>,
    outbound_bytes: usize,
    /// A pong is due for this ping stamp (only the latest ping's).
    pong: Option<u64>,
    /// Our close frame is queued: nothing goes after it.
    close_queued: bool,
    /// The peer hung up; frames it sent before may still wait for the owner.
    eof: bool,
    events: VecDeque<SocketEvent>,
    /// Ping stamps are microseconds since this instant.
    started: Instant,
    /// When the peer was last heard; `None` while its frames wait because
    /// the owner has not taken its events (that is not the peer's silence).
    heard: Option<Instant>,
    /// The owner took events while reading waited: reading goes on, and the
    /// peer counts as heard from, at the next call that knows the time.
    resumed: bool,
    sent: Instant,
    wake: Option<Instant>,
    stats: SocketStats,
}

impl ConnectionCore {
    /// A connection whose transport just opened at `now`: our hello is
    /// queued (take it with [`poll_transmit`](Self::poll_transmit)), the
    /// peer's must arrive within `handshake_timeout`. Its inflate budget is
    /// its own.
    pub fn new(config: SocketConfig, now: Instant) -> Self {
        let budget = InflateBudget::new(
            config.max_inflated_per_second,
            config.codec.max_decompressed_len,
            now,
        );
        Self::with_budget(config, Arc::new(Mutex::new(budget)), now)
    }

    /// Like [`new`](Self::new), inflating within a budget shared with other
    /// connections (a server's connections from one address share one:
    /// [`AddressBudgets`](super::budget::AddressBudgets)).
    pub fn with_budget(config: SocketConfig, budget: SharedBudget, now: Instant) -> Self {
        let deadline = now + config.handshake_timeout;
        let mut core = Self {
            decoder: FrameDecoder::new(control::hello_codec(&config.codec)),
            config,
            state: State::Handshake { deadline },
            budget,
            inbound: BytesMut::new(),
            outbound: VecDeque::new(),
            outbound_bytes: 0,
            pong: None,
            close_queued: false,
            eof: false,
            events: VecDeque::new(),
            started: now,
            heard: Some(now),
            resumed: false,
            sent: now,
            wake: Some(deadline),
            stats: SocketStats::default(),
        };
        core.queue(control::hello_frame(PROTOCOL_VERSION), now);
        core
    }

    /// Whether the driver should read: the connection has not ended and the
    /// owner's events are below `event_queue_len`. While it is `false` the
    /// peer's bytes wait in the transport (its flow control pushes back),
    /// and the time is not the peer's silence.
    pub fn wants_read(&self) -> bool {
        let open = match &self.state {
            State::Handshake { .. } => true,
            State::Open(life) => !life.read_done(),
            State::Closed { .. } => false,
        };
        open && self.heard.is_some()
    }

    /// Whether frames from the peer are still read.
    pub(super) fn reading(&self) -> bool {
        matches!(&self.state, State::Open(life) if !life.read_done())
    }

    /// Takes in bytes read from the transport.
    pub fn handle_bytes(&mut self, bytes: &[u8], now: Instant) {
        if matches!(self.state, State::Closed { .. }) {
            return;
        }
        self.on_time(now);
        self.stats.bytes_in += bytes.len() as u64;
        self.inbound.extend_from_slice(bytes);
        if self.heard.is_some() {
            self.heard = Some(now);
        }
        self.process(now);
        self.rearm(now);
    }

    /// The peer hung up (a read returned the end of the stream). Frames
    /// still buffered for an owner who has not taken its events are
    /// handed out first.
    pub fn handle_eof(&mut self, now: Instant) {
        self.eof = true;
        self.on_time(now);
        self.on_eof(now);
    }

    fn on_eof(&mut self, now: Instant) {
        if !self.eof || self.heard.is_none() {
            return;
        }
        self.process(now);
        if self.heard.is_none() {
            // Whole frames wait for the owner; the end comes after them.
            return;
        }
        if !self.inbound.is_empty() && self.reading() {
            let buffered = self.inbound.len();
            let error = SocketError::Frame(crate::codec::FrameError::Truncated { buffered });
            return self.fail_with(error, now);
        }
        match self.state {
            State::Closed { .. } => {}
            State::Handshake { .. } => self.finish(ending::hung_up_in_handshake()),
            State::Open(_) => self.read_ended(ReadEnd::Eof),
        }
    }

    /// Reading ended as `end`: the connection's life says what follows.
    pub(super) fn read_ended(&mut self, end: ReadEnd) {
        if let State::Open(life) = &mut self.state {
            let step = life.read_ended(end);
            self.take_step(step);
        }
    }

    fn take_step(&mut self, step: Step) {
        if let Step::End(reason) = step {
            self.finish(reason);
        }
    }

    /// Ends the connection now with `reason`: nothing more is written.
    fn finish(&mut self, reason: DisconnectReason) {
        self.state = State::Closed { flush_by: None };
        self.drop_outbound();
        self.end(reason);
    }

    /// The transport failed (a read or a write returned an error): the
    /// connection is lost, nothing more is written.
    pub fn handle_error(&mut self, error: std::io::Error) {
        match &mut self.state {
            State::Closed { .. } => {}
            State::Handshake { .. } => self.finish(ending::ended(ReadEnd::Lost(error), None)),
            State::Open(life) => {
                let step = life.write_failed(error);
                self.take_step(step);
            }
        }
    }

    /// Work on the clock: the handshake deadline, a keep-alive ping, an
    /// idle peer, a close that took too long. Call when
    /// [`poll_timeout`](Self::poll_timeout) has passed (earlier does no harm).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.on_time(now);
        if let State::Open(life) = &mut self.state {
            // A close under way: only its deadline counts now.
            if let Some(reason) = life.deadline_passed(now) {
                return self.finish(reason);
            }
        }
        match &self.state {
            State::Handshake { deadline } if now >= *deadline => {
                return self.fail(DisconnectReason::HandshakeTimeout, now)
            }
            State::Open(life) if life.deadline().is_some() => {}
            State::Open(life) => {
                let (ping, idle) = (self.config.keepalive_interval, self.config.idle_timeout);
                let heard = self.heard.filter(|_| !life.read_done());
                match keepalive::tick(now, heard, self.sent, ping, idle) {
                    Tick::Idle => return self.fail(DisconnectReason::IdleTimeout, now),
                    Tick::Ping { .. } => {
                        let stamp = self.stamp(now);
                        self.queue(control::ping_frame(stamp, &self.config.codec), now);
                    }
                    Tick::Wait { .. } => {}
                }
            }
            State::Closed {
                flush_by: Some(deadline),
            } if now >= *deadline => {
                // The peer did not take our close in time: let it go.
                self.state = State::Closed { flush_by: None };
                self.drop_outbound();
            }
            _ => {}
        }
        self.rearm(now);
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work; `None`
    /// once the connection has ended and nothing is left to write.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.wake
    }

    /// The next bytes to write to the transport, in order: our hello first,
    /// then a due pong, then the queue.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        let pong = if self.stats.frames_out > 0 {
            self.pong.take()
        } else {
            None
        };
        let bytes = match pong {
            Some(stamp) => control::pong_frame(stamp, &self.config.codec),
            None => {
                let bytes = self.outbound.pop_front()?;
                self.outbound_bytes -= bytes.len();
                bytes
            }
        };
        self.stats.frames_out += 1;
        self.stats.bytes_out += bytes.len() as u64;
        if self.should_shutdown() {
            // Our close frame just went: the connection's life goes on
            // (a linger until the peer hangs up) or ends.
            if let State::Open(life) = &mut self.state {
                let closed = || DisconnectReason::Closed {
                    code: CloseCode::NORMAL,
                    reason: "closed".into(),
                };
                let step = life.close_sent(closed, self.sent);
                self.take_step(step);
            }
        }
        if self.outbound.is_empty() && matches!(self.state, State::Closed { .. }) {
            // The last bytes are out: nothing to wait for.
            self.wake = None;
        }
        Some(bytes)
    }

    /// Whether our close frame is out: once it is written, the driver shuts
    /// the transport's sending side down (a TCP FIN, a WebSocket close)
    /// and reads on until the peer hangs up or the core has ended.
    pub fn should_shutdown(&self) -> bool {
        self.close_queued && self.outbound.is_empty()
    }

    /// The next thing for the owner to hear; `Disconnected` is the last.
    pub fn poll_event(&mut self) -> Option<SocketEvent> {
        let event = self.events.pop_front()?;
        if self.heard.is_none() && self.events.len() < self.config.event_queue_len {
            self.resumed = true;
        }
        Some(event)
    }

    /// Queues a message (after the handshake's hello, if it is still under
    /// way). A queue past `outbound_queue_len` frames or
    /// `max_outbound_bytes` drops the peer as a slow consumer.
    pub fn send(&mut self, message: &Message, now: Instant) -> Result<(), SendError> {
        if !(matches!(self.state, State::Handshake { .. }) || self.is_open()) {
            return Err(SendError::Closed);
        }
        let frame = message.encode(&self.config.codec)?.into_bytes();
        if !self
            .config
            .queue_has_room(self.outbound.len(), self.outbound_bytes, frame.len())
        {
            self.fail(DisconnectReason::SlowConsumer, now);
            return Err(SendError::SlowConsumer);
        }
        self.queue(frame, now);
        self.rearm(now);
        Ok(())
    }

    /// Closes with `code` and `reason` after what was queued: the close
    /// frame goes last; the connection ends when the peer hangs up or
    /// answers, or after `close_timeout`.
    pub fn close(&mut self, code: CloseCode, reason: &str, now: Instant) {
        let closed = DisconnectReason::Closed {
            code,
            reason: reason.to_string(),
        };
        match &mut self.state {
            // Before the peer's hello: told why, and ended.
            State::Handshake { .. } => return self.fail(closed, now),
            State::Open(life) if life.closing().is_none() => {
                life.begin_close(closed, now);
                self.queue_close(code, reason, now);
            }
            _ => return,
        }
        self.rearm(now);
    }

    /// Whether the handshake is done and no close has begun.
    pub fn is_open(&self) -> bool {
        matches!(&self.state, State::Open(life) if life.closing().is_none())
    }

    /// Whether the connection has ended (`Disconnected` was queued).
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed { .. })
    }

    /// Its counters (the round trip once a pong came back).
    pub fn stats(&self) -> SocketStats {
        SocketStats {
            queued_bytes: self.outbound_bytes as u64,
            queued_frames: self.outbound.len() as u64,
            ..self.stats
        }
    }

    /// The peer broke a rule: the owner hears the error, then the end
    /// (at once when our close is already out).
    pub(super) fn fail_with(&mut self, error: SocketError, now: Instant) {
        if matches!(&self.state, State::Open(life) if life.write_done()) {
            return self.read_ended(ReadEnd::Eof);
        }
        let reason = DisconnectReason::ProtocolError(error.to_string());
        self.events.push_back(SocketEvent::Error(error));
        self.fail(reason, now);
    }

    /// Closes at once for `reason`, telling the peer why: during the
    /// handshake the connection ends now (the close written within
    /// `close_timeout`); once open, the connection's life decides (our
    /// close frame jumps the queue; idle peers and broken rules are not
    /// waited for once it is out).
    fn fail(&mut self, reason: DisconnectReason, now: Instant) {
        if let State::Handshake { .. } = self.state {
            // What waits to go is dropped, but for our hello if it has not
            // left yet: the peer reads the close only after a hello.
            let keep = usize::from(self.stats.frames_out == 0);
            self.outbound.truncate(keep);
            self.outbound_bytes = self.outbound.iter().map(Bytes::len).sum();
            self.queue_close(reason.close_code(), &reason.to_string(), now);
            self.state = State::Closed {
                flush_by: Some(now + self.config.close_timeout),
            };
            self.end(reason);
            return self.rearm(now);
        }
        let close_out = self.should_shutdown();
        let State::Open(life) = &mut self.state else {
            return;
        };
        let first = match &reason {
            DisconnectReason::IdleTimeout => life.idle(now),
            DisconnectReason::ProtocolError(what) => life.broken_rule(what, now),
            _ => life.begin_close(reason.clone(), now),
        };
        if first {
            self.drop_outbound();
            self.queue_close(reason.close_code(), &reason.to_string(), now);
        } else if close_out {
            // Our close is out already: nothing more to wait for.
            let step = life.close_sent(|| reason, now);
            return self.take_step(step);
        }
        self.rearm(now);
    }

    fn end(&mut self, reason: DisconnectReason) {
        self.wake = None;
        self.inbound = BytesMut::new();
        self.events.push_back(SocketEvent::Disconnected(reason));
    }

    fn drop_outbound(&mut self) {
        self.outbound.clear();
        self.outbound_bytes = 0;
        self.pong = None;
    }

    fn queue_close(&mut self, code: CloseCode, reason: &str, now: Instant) {
        self.pong = None;
        self.queue(control::close_frame(code, reason, &self.config.codec), now);
        self.close_queued = true;
    }

    fn queue(&mut self, frame: Bytes, now: Instant) {
        if self.close_queued {
            return;
        }
        self.outbound_bytes += frame.len();
        self.outbound.push_back(frame);
        self.sent = now;
    }

    /// The owner took events while reading waited: go on reading (and
    /// with the end of the stream, if it came meanwhile).
    fn on_time(&mut self, now: Instant) {
        if std::mem::take(&mut self.resumed) && self.heard.is_none() {
            self.heard = Some(now);
            self.process(now);
            self.on_eof(now);
        }
    }

    fn rearm(&mut self, now: Instant) {
        self.wake = match &self.state {
            State::Handshake { deadline } => Some(*deadline),
            State::Open(life) if life.deadline().is_some() => life.deadline(),
            State::Open(_) => {
                let (ping, idle) = (self.config.keepalive_interval, self.config.idle_timeout);
                match keepalive::tick(now, self.heard, self.sent, ping, idle) {
                    Tick::Idle | Tick::Ping { .. } => Some(now),
                    Tick::Wait { next } => Some(next),
                }
            }
            State::Closed { flush_by } if !self.outbound.is_empty() => *flush_by,
            State::Closed { .. } => None,
        };
    }

    fn stamp(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.started).as_micros() as u64
    }
}

mod reading;
#[cfg(test)]
mod tests;
