//! The cases on `ConnectionCore`: the peer's bytes handed in, the time
//! advanced at once from one timeout to the next.

use std::time::{Duration, Instant};

use switchboard::{SocketEvent, PROTOCOL_VERSION};
use switchboard_proto::connection::ConnectionCore;

use super::{Case, Outcome, Step};
use crate::common::hello;

/// The longest a case may run, in its own time.
const LIMIT: Duration = Duration::from_secs(60);

struct Run {
    core: ConnectionCore,
    now: Instant,
    /// The peer's bytes not yet taken (the core does not read while the
    /// owner's events wait).
    unread: Vec<u8>,
    hung_up: bool,
    eof_given: bool,
    /// What the peer read.
    peer: Vec<u8>,
    peer_eof: bool,
    outcome: Outcome,
}

impl Run {
    /// Moves bytes both ways and lets the owner take its events if `owner`.
    fn carry(&mut self, owner: bool) {
        loop {
            let mut moved = false;
            if self.core.wants_read() && !self.unread.is_empty() {
                let bytes = std::mem::take(&mut self.unread);
                self.core.handle_bytes(&bytes, self.now);
                moved = true;
            }
            if self.core.wants_read() && self.unread.is_empty() && self.hung_up && !self.eof_given {
                self.eof_given = true;
                self.core.handle_eof(self.now);
                moved = true;
            }
            while let Some(bytes) = self.core.poll_transmit() {
                self.peer.extend_from_slice(&bytes);
                moved = true;
            }
            if self.core.should_shutdown()
                || self.core.is_closed() && self.core.poll_timeout().is_none()
            {
                self.peer_eof = true;
            }
            while let Some(event) = owner.then(|| self.core.poll_event()).flatten() {
                moved = true;
                match event {
                    SocketEvent::Connected => {}
                    SocketEvent::Received(_) => self.outcome.received += 1,
                    SocketEvent::Error(error) => self.outcome.errors.push(error.to_string()),
                    SocketEvent::Disconnected(reason) => self.outcome.reason = Some(reason),
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// Time passes until `until`, the core's timeouts handled on the way.
    fn advance(&mut self, until: Instant, owner: bool) {
        loop {
            self.carry(owner);
            match self.core.poll_timeout() {
                Some(at) if at <= until => {
                    self.now = self.now.max(at);
                    self.core.handle_timeout(self.now);
                }
                _ => break,
            }
        }
        self.now = until;
        self.carry(owner);
    }
}

pub fn run(case: &Case) -> Outcome {
    let start = Instant::now();
    let mut run = Run {
        core: ConnectionCore::new(case.config.clone(), start),
        now: start,
        unread: Vec::new(),
        hung_up: false,
        eof_given: false,
        peer: Vec::new(),
        peer_eof: false,
        outcome: Outcome::default(),
    };
    if case.hello {
        run.unread.extend(hello(PROTOCOL_VERSION));
    }
    run.carry(true);
    for step in &case.steps {
        match step {
            Step::Send(bytes) => {
                run.unread.extend_from_slice(bytes);
                run.carry(true);
            }
            Step::HangUp => {
                run.hung_up = true;
                run.carry(true);
            }
            Step::Wait(time) => run.advance(run.now + *time, true),
            Step::Busy(time) => run.advance(run.now + *time, false),
        }
    }
    // Then until the end, and the last bytes out.
    while run.outcome.reason.is_none() || !run.peer_eof {
        let Some(at) = run.core.poll_timeout() else {
            run.carry(true);
            break;
        };
        assert!(at < start + LIMIT, "{}: no end within {LIMIT:?}", case.name);
        run.advance(at, true);
    }
    let (peer, eof) = (std::mem::take(&mut run.peer), run.peer_eof);
    run.outcome.read_peer_bytes(&peer, eof);
    run.outcome
}
