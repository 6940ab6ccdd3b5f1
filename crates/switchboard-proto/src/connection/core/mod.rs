//! [`ConnectionCore`]: one connection as a state machine without IO, for a
//! driver that is not tokio's (an engine's frame loop over a non-blocking
//! socket, a test, a replay).
//!
//! ```text
//!   driver                                         ConnectionCore
//!     bytes read            ──handle_bytes(b, now)──▶  hello, frames, ping/pong, close
//!     peer hung up          ──handle_eof()──────────▶
//!     poll_timeout() passed ──handle_timeout(now)───▶  handshake deadline, keep-alive, idle
//!     bytes to write        ◀──poll_transmit()──────
//!     events for the owner  ◀──poll_event()─────────  Connected, Received, Error, Disconnected
//! ```
//!
//! The same rules as `switchboard`'s tokio connection: a hello each way
//! opens it, a ping goes out after `keepalive_interval` without sending, a
//! peer silent for `idle_timeout` is dropped, either side closes with a
//! code and a reason, and the outbound queue is bounded. (The tokio driver
//! keeps its own hand-tuned reader and writer; both take the frames and
//! the keep-alive rule from [`control`](super::control) and
//! [`keepalive`](super::keepalive).) Compressed frames inflate up to
//! `codec.max_decompressed_len` each; the per-second inflate budget is the
//! tokio server's.

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use super::control::{self, CloseFrame, Hello, MAX_HELLO_FRAME_LEN};
use super::keepalive::{self, Tick};
use super::{SocketConfig, SocketEvent, SocketStats};
use crate::codec::FrameDecoder;
use crate::message::{Message, SYSTEM_CHANNEL};
use crate::reason::{CloseCode, DisconnectReason, IoFailure, SendError, SocketError};
use crate::PROTOCOL_VERSION;

/// Where the connection is in its life.
#[derive(Debug)]
enum State {
    /// Our hello is queued; the peer's must arrive by `deadline`.
    Handshake {
        deadline: Instant,
    },
    Open,
    /// Our close frame is queued; the peer hangs up (or answers) by
    /// `deadline`, then the connection has ended with `reason`.
    Closing {
        deadline: Instant,
        reason: DisconnectReason,
    },
    Closed,
}

/// One connection's rules, with the bytes and the time passed in.
#[derive(Debug)]
pub struct ConnectionCore {
    config: SocketConfig,
    state: State,
    decoder: FrameDecoder,
    inbound: BytesMut,
    outbound: VecDeque<Bytes>,
    outbound_bytes: usize,
    events: VecDeque<SocketEvent>,
    /// Ping stamps are microseconds since this instant.
    started: Instant,
    heard: Instant,
    sent: Instant,
    wake: Option<Instant>,
    stats: SocketStats,
}

impl ConnectionCore {
    /// A connection whose transport just opened at `now`: our hello is
    /// queued (take it with [`poll_transmit`](Self::poll_transmit)), the
    /// peer's must arrive within `handshake_timeout`.
    pub fn new(config: SocketConfig, now: Instant) -> Self {
        let deadline = now + config.handshake_timeout;
        let mut core = Self {
            decoder: FrameDecoder::new(config.codec.clone()),
            config,
            state: State::Handshake { deadline },
            inbound: BytesMut::new(),
            outbound: VecDeque::new(),
            outbound_bytes: 0,
            events: VecDeque::new(),
            started: now,
            heard: now,
            sent: now,
            wake: Some(deadline),
            stats: SocketStats::default(),
        };
        core.queue(control::hello_frame(PROTOCOL_VERSION), now);
        core
    }

    /// Takes in bytes read from the transport.
    pub fn handle_bytes(&mut self, bytes: &[u8], now: Instant) {
        if matches!(self.state, State::Closed) {
            return;
        }
        self.heard = now;
        self.stats.bytes_in += bytes.len() as u64;
        self.inbound.extend_from_slice(bytes);
        while !matches!(self.state, State::Closed) {
            if matches!(self.state, State::Handshake { .. }) && self.hello_too_long() {
                return self.fail(DisconnectReason::NotSwitchboard, now);
            }
            let frame = match self.decoder.decode(&mut self.inbound) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) if matches!(self.state, State::Handshake { .. }) => {
                    return self.fail(DisconnectReason::NotSwitchboard, now)
                }
                Err(err) => {
                    return self.fail(DisconnectReason::ProtocolError(err.to_string()), now)
                }
            };
            self.stats.frames_in += 1;
            match self.state {
                State::Handshake { .. } => self.on_hello(frame.compressed, &frame.payload, now),
                State::Open | State::Closing { .. } => match Message::decode(frame.payload) {
                    Ok(message) if message.channel_id() == SYSTEM_CHANNEL => {
                        self.on_system(message, now)
                    }
                    Ok(message) if matches!(self.state, State::Open) => {
                        self.events.push_back(SocketEvent::Received(message))
                    }
                    // Closing: what the peer sends before it hears our close
                    // is no one's any more.
                    Ok(_) => {}
                    Err(err) => {
                        let reason = DisconnectReason::ProtocolError(err.to_string());
                        return self.fail(reason, now);
                    }
                },
                State::Closed => {}
            }
        }
        self.rearm(now);
    }

    /// The peer hung up (the transport read its end).
    pub fn handle_eof(&mut self) {
        let reason = match std::mem::replace(&mut self.state, State::Closed) {
            State::Closed => return,
            State::Closing { reason, .. } => reason,
            State::Handshake { .. } => lost("the peer hung up before its hello"),
            State::Open => lost("the peer hung up without a goodbye"),
        };
        self.end(reason);
    }

    /// Work on the clock: the handshake deadline, a keep-alive ping, an
    /// idle peer, a close that took too long. Call when
    /// [`poll_timeout`](Self::poll_timeout) has passed (earlier does no harm).
    pub fn handle_timeout(&mut self, now: Instant) {
        match &self.state {
            State::Handshake { deadline } if now >= *deadline => {
                return self.fail(DisconnectReason::HandshakeTimeout, now)
            }
            State::Open => {
                let (ping, idle) = (self.config.keepalive_interval, self.config.idle_timeout);
                match keepalive::tick(now, Some(self.heard), self.sent, ping, idle) {
                    Tick::Idle => return self.fail(DisconnectReason::IdleTimeout, now),
                    Tick::Ping { .. } => {
                        let stamp = self.stamp(now);
                        self.queue(control::ping_frame(stamp, &self.config.codec), now);
                    }
                    Tick::Wait { .. } => {}
                }
            }
            State::Closing { deadline, .. } if now >= *deadline => {
                if let State::Closing { reason, .. } =
                    std::mem::replace(&mut self.state, State::Closed)
                {
                    self.end(reason);
                }
                return;
            }
            _ => {}
        }
        self.rearm(now);
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work; `None`
    /// once the connection has ended.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.wake
    }

    /// The next bytes to write to the transport, in order.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        let bytes = self.outbound.pop_front()?;
        self.outbound_bytes -= bytes.len();
        self.stats.frames_out += 1;
        self.stats.bytes_out += bytes.len() as u64;
        Some(bytes)
    }

    /// The next thing for the owner to hear; `Disconnected` is the last.
    pub fn poll_event(&mut self) -> Option<SocketEvent> {
        self.events.pop_front()
    }

    /// Queues a message (after the handshake's hello, if it is still under
    /// way). A queue past `outbound_queue_len` frames or
    /// `max_outbound_bytes` drops the peer as a slow consumer.
    pub fn send(&mut self, message: &Message, now: Instant) -> Result<(), SendError> {
        if !matches!(self.state, State::Handshake { .. } | State::Open) {
            return Err(SendError::Closed);
        }
        let frame = message.encode(&self.config.codec)?.into_bytes();
        if self.outbound.len() >= self.config.outbound_queue_len
            || self.outbound_bytes + frame.len() > self.config.max_outbound_bytes
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
        if !matches!(self.state, State::Handshake { .. } | State::Open) {
            return;
        }
        self.queue(control::close_frame(code, reason, &self.config.codec), now);
        self.state = State::Closing {
            deadline: now + self.config.close_timeout,
            reason: DisconnectReason::Closed {
                code,
                reason: reason.to_string(),
            },
        };
        self.rearm(now);
    }

    /// Whether the handshake is done and no close has begun.
    pub fn is_open(&self) -> bool {
        matches!(self.state, State::Open)
    }

    /// Whether the connection has ended (`Disconnected` was queued).
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// Its counters (the round trip once a pong came back).
    pub fn stats(&self) -> SocketStats {
        SocketStats {
            queued_bytes: self.outbound_bytes as u64,
            queued_frames: self.outbound.len() as u64,
            ..self.stats
        }
    }

    fn on_hello(&mut self, compressed: bool, payload: &[u8], now: Instant) {
        let reason = match control::parse_hello(payload) {
            Hello::Compatible if !compressed => {
                self.state = State::Open;
                self.events.push_back(SocketEvent::Connected);
                return;
            }
            Hello::OtherVersion(theirs) if !compressed => DisconnectReason::VersionMismatch {
                ours: PROTOCOL_VERSION,
                theirs,
            },
            _ => DisconnectReason::NotSwitchboard,
        };
        self.fail(reason, now);
    }

    fn on_system(&mut self, message: Message, now: Instant) {
        match message.action_id() {
            control::ACTION_PING => {
                if let Ok(stamp) = message.content::<u64>() {
                    self.queue(control::pong_frame(stamp, &self.config.codec), now);
                }
            }
            control::ACTION_PONG => {
                if let Ok(stamp) = message.content::<u64>() {
                    self.stats.rtt_micros = self.stamp(now).saturating_sub(stamp);
                }
            }
            control::ACTION_CLOSE => {
                let close = message.content::<CloseFrame>().unwrap_or(CloseFrame {
                    code: CloseCode::PROTOCOL_ERROR,
                    reason: "undecodable close frame".into(),
                });
                let reason = match std::mem::replace(&mut self.state, State::Closed) {
                    State::Closing { reason, .. } => reason,
                    _ => DisconnectReason::ClosedByPeer {
                        code: close.code,
                        reason: close.reason,
                    },
                };
                self.end(reason);
            }
            other => self
                .events
                .push_back(SocketEvent::Error(SocketError::UnknownSystemAction(other))),
        }
    }

    /// Ends the connection at once for `reason`, telling the peer why when
    /// the transport still carries anything.
    fn fail(&mut self, reason: DisconnectReason, now: Instant) {
        // What waits to go is dropped, but for our hello if it has not left
        // yet: the peer reads the close only after a hello.
        let keep = match self.state {
            State::Closed => return,
            State::Handshake { .. } if self.stats.frames_out == 0 => 1,
            _ => 0,
        };
        self.state = State::Closed;
        self.outbound.truncate(keep);
        self.outbound_bytes = self.outbound.iter().map(Bytes::len).sum();
        let frame =
            control::close_frame(reason.close_code(), &reason.to_string(), &self.config.codec);
        self.queue(frame, now);
        self.end(reason);
    }

    fn end(&mut self, reason: DisconnectReason) {
        self.wake = None;
        self.inbound = BytesMut::new();
        self.events.push_back(SocketEvent::Disconnected(reason));
    }

    fn queue(&mut self, frame: Bytes, now: Instant) {
        self.outbound_bytes += frame.len();
        self.outbound.push_back(frame);
        self.sent = now;
    }

    fn rearm(&mut self, now: Instant) {
        self.wake = match &self.state {
            State::Handshake { deadline } | State::Closing { deadline, .. } => Some(*deadline),
            State::Open => {
                let (ping, idle) = (self.config.keepalive_interval, self.config.idle_timeout);
                match keepalive::tick(now, Some(self.heard), self.sent, ping, idle) {
                    Tick::Idle => Some(now),
                    Tick::Ping { .. } => Some(now),
                    Tick::Wait { next } => Some(next),
                }
            }
            State::Closed => None,
        };
    }

    /// A peer whose first frame announces more than a hello is not ours.
    fn hello_too_long(&self) -> bool {
        self.inbound.len() >= 4
            && u32::from_be_bytes([
                self.inbound[0],
                self.inbound[1],
                self.inbound[2],
                self.inbound[3],
            ]) as usize
                + 4
                > MAX_HELLO_FRAME_LEN
    }

    fn stamp(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.started).as_micros() as u64
    }
}

fn lost(what: &'static str) -> DisconnectReason {
    DisconnectReason::ConnectionLost(IoFailure::new(ErrorKind::UnexpectedEof, what))
}

#[cfg(test)]
mod tests;
