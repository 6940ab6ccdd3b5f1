//! How the core reads: the peer's hello, then the frames of an open
//! connection through the shared rules ([`inbound`]), while the owner has
//! room for their events.

use std::ops::Range;
use std::time::Instant;

use super::{ConnectionCore, State};
use crate::connection::control;
use crate::connection::ending::ReadEnd;
use crate::connection::inbound::{self, BatchLimits, End, Sink};
use crate::connection::lifecycle::Lifecycle;
use crate::connection::SocketEvent;
use crate::message::Message;
use crate::reason::SocketError;

impl ConnectionCore {
    /// Reads the frames buffered, while the owner has room for their events.
    pub(super) fn process(&mut self, now: Instant) {
        if matches!(self.state, State::Handshake { .. }) && !self.take_hello(now) {
            return;
        }
        while !self.inbound.is_empty() && self.reading() && self.heard.is_some() {
            let room = self
                .config
                .event_queue_len
                .saturating_sub(self.events.len());
            if room == 0 {
                // The owner has not taken its events: the rest waits.
                self.heard = None;
                return;
            }
            let mut read = Read::default();
            let limits = BatchLimits {
                items: room,
                bytes: u64::MAX,
            };
            let taken = inbound::take_frames(
                &mut self.inbound,
                &mut self.decoder,
                &self.budget,
                || now,
                limits,
                &mut read,
            );
            self.stats.frames_in += taken.frames;
            let chunk = self.inbound.split_to(taken.taken).freeze();
            for item in read.items {
                self.events.push_back(match item {
                    Item::At(channel, action, range) => SocketEvent::Received(Message::from_raw(
                        channel,
                        action,
                        chunk.slice(range),
                    )),
                    Item::Event(event) => event,
                });
            }
            if let Some(stamp) = read.pong {
                self.stats.rtt_micros = self.stamp(now).saturating_sub(stamp);
            }
            if read.ping.is_some() && !self.close_queued {
                self.pong = read.ping;
            }
            match taken.end {
                Some(End::PeerClosed(close)) => return self.read_ended(ReadEnd::PeerClosed(close)),
                Some(End::Failed(error)) => return self.fail_with(error, now),
                None if taken.frames == 0 => return,
                None => {}
            }
        }
    }

    /// The peer's hello, if it is in: `true` once the connection is open.
    fn take_hello(&mut self, now: Instant) -> bool {
        let first = match self.decoder.decode(&mut self.inbound) {
            Ok(None) => return false,
            Ok(Some(frame)) => control::check_first_frame(Ok(&frame)),
            Err(err) => control::check_first_frame(Err(&err)),
        };
        self.stats.frames_in += 1;
        match first {
            Ok(()) => {
                *self.decoder.config_mut() = self.config.codec.clone();
                self.state = State::Open(Lifecycle::new(self.config.close_timeout));
                self.events.push_back(SocketEvent::Connected);
                true
            }
            Err(reason) => {
                self.fail(reason, now);
                false
            }
        }
    }
}

/// One read's events, in order, as the core collects them.
#[derive(Default)]
struct Read {
    items: Vec<Item>,
    ping: Option<u64>,
    pong: Option<u64>,
}

enum Item {
    /// A message whose content is a range of the read's bytes.
    At(u16, u16, Range<usize>),
    Event(SocketEvent),
}

impl Sink for Read {
    fn message_at(&mut self, channel: u16, action: u16, content: Range<usize>) {
        self.items.push(Item::At(channel, action, content));
    }

    fn message(&mut self, message: Message) {
        self.items.push(Item::Event(SocketEvent::Received(message)));
    }

    fn error(&mut self, error: SocketError) {
        self.items.push(Item::Event(SocketEvent::Error(error)));
    }

    fn ping(&mut self, stamp: u64) {
        self.ping = Some(stamp);
    }

    fn pong(&mut self, stamp: u64) {
        self.pong = Some(stamp);
    }

    fn len(&self) -> usize {
        self.items.len()
    }
}
