//! Arbitrary messages from three connections into a manager core: hellos,
//! resumes with made-up tokens, requests, garbage, hang-ups and ticks, in
//! any order. Any panic is a bug. Shared by the fuzz target and the corpus
//! replay test.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use switchboard::manager::{ManagerCore, ManagerEvent, ManagerRules};
use switchboard::session::Seeded;
use switchboard::{
    ClientId, DisconnectReason, GameLogic, Message, Outbox, PeerId, Rejection, Request,
};

/// Accepts a `u32` at most 100 and tells everyone.
struct Rules(u64);

impl GameLogic for Rules {
    type Message = switchboard::Message;
    type Command = u32;
    fn validate(&self, request: &Request) -> Result<u32, Rejection> {
        match request.content::<u32>()? {
            n @ 0..=100 => Ok(n),
            _ => Err(Rejection::invalid("too big")),
        }
    }
    fn apply(&mut self, _: ClientId, n: u32, out: &mut Outbox) {
        self.0 += u64::from(n);
        out.send(
            switchboard::Audience::All,
            Message::from_raw(16, 1, Bytes::copy_from_slice(&self.0.to_le_bytes())),
        );
    }
}

pub fn run(data: &[u8]) {
    let mut rules = ManagerRules::default();
    rules.sessions.max_sessions = 4;
    rules.max_strikes = 5;
    let mut core = ManagerCore::new(rules, Rules(0), Box::new(Seeded::new(7)));
    let mut now = Instant::now();
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
    for peer in 1..=3 {
        let _ = core
            .handle(
                ManagerEvent::Connected {
                    peer: PeerId(peer),
                    addr,
                },
                now,
            )
            .count();
    }
    // Each record: one byte (peer and what), one byte (length), then that
    // many bytes of message.
    let mut rest = data;
    while let [op, len, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        let (body, next) = tail.split_at(len);
        rest = next;
        let peer = PeerId(u64::from(op % 3) + 1);
        match op / 3 % 4 {
            0 | 1 => {
                if let Ok(message) = Message::decode(Bytes::copy_from_slice(body)) {
                    let _ = core
                        .handle(ManagerEvent::Received { peer, message }, now)
                        .count();
                }
            }
            2 => {
                now += Duration::from_millis(u64::from(*op) * 37);
                let _ = core.tick(now, |_| Some(Duration::from_millis(5))).count();
            }
            _ => {
                let reason = DisconnectReason::SlowConsumer;
                let _ = core
                    .handle(ManagerEvent::Disconnected { peer, reason }, now)
                    .count();
                let _ = core
                    .handle(ManagerEvent::Connected { peer, addr }, now)
                    .count();
            }
        }
    }
    let _ = core.snapshot(now, |_| None);
}
