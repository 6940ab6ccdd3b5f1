//! Reconnecting: where the next attempt goes (the address the session was
//! on, then the service's others, or where a directory says it is now) and
//! when (a jittered, doubling backoff, skipped once for news from a
//! directory).

use std::time::{Duration, Instant};

use super::{ClientCore, ClientEvent};
use crate::client::{RequestError, RequestStatus};
use crate::reason::{CloseCode, DisconnectReason};

impl ClientCore {
    /// Replaces `ClientConfig::fallback_servers` (a directory said where
    /// the service is now); the next attempts go round the new list, the
    /// client's first address first.
    pub fn set_fallback_servers(&mut self, servers: Vec<String>) {
        self.config.fallback_servers = servers;
        self.home = 0;
        self.target = 0;
    }

    /// Like [`set_fallback_servers`](Self::set_fallback_servers), when a
    /// directory says where the service is *now*: the next reconnect
    /// attempt goes to the first of `servers`, the following ones round
    /// the list (the client's first address, where it was, last). When the
    /// list is news (not what the client had), that attempt does not wait
    /// out its backoff.
    pub fn redirect(&mut self, servers: Vec<String>, now: Instant) {
        let news = servers != self.config.fallback_servers;
        let count = 1 + servers.len();
        self.config.fallback_servers = servers;
        // The next attempt `a` goes to (home + a - 1) % count: make it 1.
        let next = match self.retry {
            Some((attempt, _)) if attempt == self.started_attempt => attempt + 1,
            Some((attempt, _)) => attempt,
            None => 1,
        } as usize;
        self.home = (1 + count - (next.saturating_sub(1) % count)) % count;
        self.target = 0;
        if !news {
            return;
        }
        match &mut self.retry {
            // Scheduled, not started: it goes now.
            Some((attempt, at)) if *attempt != self.started_attempt => *at = now.min(*at),
            // Under way (to where the client was): the next one goes as
            // soon as it fails.
            Some(_) => self.redirected = true,
            None => {}
        }
    }

    pub(super) fn on_disconnected(&mut self, reason: DisconnectReason, now: Instant) {
        self.connected = false;
        self.welcomed = false;
        let policy = &self.config.reconnect;
        let attempt = self.retry.map_or(1, |(n, _)| n + 1);
        // A server too busy to take this connection now says when to come
        // back: a first join waits and tries again too.
        let told_to_wait = told_to_retry_after(&reason);
        let may_retry = policy.enabled
            && !self.refused
            && !self.closed
            && (self.identity.is_some() || told_to_wait.is_some())
            && (worth_retrying(&reason) || told_to_wait.is_some())
            && attempt <= policy.max_attempts;
        if !may_retry {
            // No session to come back to: what waited for a verdict is lost.
            let mut open: Vec<u64> = self.pending.keys().copied().collect();
            open.sort_unstable();
            for id in open {
                let failure = RequestStatus::Failed(RequestError::ConnectionLost);
                self.finish_request(id, failure);
            }
            self.retry = None;
            self.started_attempt = 0;
            self.events.push_back(ClientEvent::Disconnected(reason));
            return;
        }
        if attempt == 1 {
            self.events.push_back(ClientEvent::ConnectionLost(reason));
        }
        let delay = if std::mem::take(&mut self.redirected) {
            Duration::ZERO
        } else {
            self.backoff(attempt).max(told_to_wait.unwrap_or_default())
        };
        self.retry = Some((attempt, now + delay));
    }

    /// The wait before attempt `attempt`: doubling from `initial_delay` up to
    /// `max_delay`, then drawn at random between half and all of it, so the
    /// clients of a restarted server do not all come back in one instant.
    fn backoff(&mut self, attempt: u32) -> Duration {
        let policy = &self.config.reconnect;
        let full = crate::limits::doubling(policy.initial_delay, policy.max_delay, attempt);
        // xorshift64
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let fraction = 0.5 + (self.rng >> 11) as f64 / (1u64 << 53) as f64 * 0.5;
        full.mul_f64(fraction)
    }
}

/// How long the server said to wait, when it turned the connection away
/// for now ([`CloseCode::SERVER_FULL`] with a retry-after).
fn told_to_retry_after(reason: &DisconnectReason) -> Option<Duration> {
    match reason {
        DisconnectReason::ClosedByPeer { code, reason } if *code == CloseCode::SERVER_FULL => {
            crate::reason::retry_after_of(reason)
        }
        _ => None,
    }
}

/// Whether a connection that ended this way may get its session back.
fn worth_retrying(reason: &DisconnectReason) -> bool {
    match reason {
        DisconnectReason::ConnectionLost(_)
        | DisconnectReason::ConnectFailed(_)
        | DisconnectReason::IdleTimeout
        | DisconnectReason::HandshakeTimeout => true,
        DisconnectReason::ClosedByPeer { code, .. } => {
            *code == CloseCode::IDLE_TIMEOUT || *code == CloseCode::SLOW_CONSUMER
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::core::ClientAction;
    use crate::client::ClientConfig;
    use crate::connection::SocketEvent;
    use crate::manager::protocol::{self, Welcome};
    use crate::session::{ClientId, ReconnectToken};

    fn lost() -> DisconnectReason {
        DisconnectReason::ConnectionLost(crate::reason::IoFailure::new(
            std::io::ErrorKind::ConnectionReset,
            "reset",
        ))
    }

    fn welcomed_core(seed: u64) -> ClientCore {
        let mut core = ClientCore::new(ClientConfig::named("ann"), seed);
        core.start();
        let welcome = Welcome {
            client: ClientId::from_u128(42),
            token: ReconnectToken([1; 32]),
            resumed: false,
            grace_secs: 60,
        };
        let message = protocol::session_message(protocol::WELCOME, &welcome);
        core.handle(SocketEvent::Received(message), Instant::now());
        core
    }

    fn retry_delay(core: &ClientCore, from: Instant) -> Duration {
        core.next_deadline().unwrap() - from
    }

    #[test]
    fn a_first_join_turned_away_with_a_retry_after_waits_at_least_that_long_and_tries_again() {
        let t0 = Instant::now();
        let mut core = ClientCore::new(ClientConfig::named("ann"), 7);
        core.start();
        let busy = DisconnectReason::ClosedByPeer {
            code: CloseCode::SERVER_FULL,
            reason: crate::reason::with_retry_after(
                "too many connections from your address at once",
                Duration::from_secs(3),
            ),
        };
        core.handle(SocketEvent::Disconnected(busy), t0);
        let (attempt, at) = core.next_reconnect().expect("it tries again");
        assert_eq!(attempt, 1);
        assert!(at - t0 >= Duration::from_secs(3), "{:?}", at - t0);
        // Turned away for good (a refusal without a retry-after): no retry.
        let mut core = ClientCore::new(ClientConfig::named("bob"), 7);
        core.start();
        let full = DisconnectReason::ClosedByPeer {
            code: CloseCode::SERVER_FULL,
            reason: "server full".into(),
        };
        core.handle(SocketEvent::Disconnected(full), t0);
        assert!(core.next_reconnect().is_none());
    }

    #[test]
    fn a_retry_after_reads_back_from_its_close_reason() {
        let text = crate::reason::with_retry_after("busy", Duration::from_millis(1500));
        assert_eq!(text, "busy (retry after 1500 ms)");
        assert_eq!(
            crate::reason::retry_after_of(&text),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(crate::reason::retry_after_of("server full"), None);
        assert_eq!(
            crate::reason::retry_after_of("x (retry after lots ms)"),
            None
        );
    }

    #[test]
    fn reconnect_waits_are_jittered_between_half_and_all_of_the_backoff() {
        let now = Instant::now();
        let mut delays = Vec::new();
        for seed in 0..64 {
            let mut core = welcomed_core(seed);
            core.handle(SocketEvent::Disconnected(lost()), now);
            let delay = retry_delay(&core, now);
            assert!(delay >= Duration::from_millis(100) && delay <= Duration::from_millis(200));
            delays.push(delay);
        }
        delays.sort();
        delays.dedup();
        assert!(
            delays.len() > 32,
            "64 clients drew {} distinct waits",
            delays.len()
        );
    }

    #[test]
    fn reconnect_backoff_doubles_up_to_the_maximum() {
        let mut core = welcomed_core(7);
        let mut now = Instant::now();
        let mut previous_top = Duration::ZERO;
        for attempt in 1..=8u32 {
            core.handle(SocketEvent::Disconnected(lost()), now);
            let delay = retry_delay(&core, now);
            let full = Duration::from_millis(200)
                .saturating_mul(1 << (attempt - 1))
                .min(Duration::from_secs(5));
            assert!(
                delay >= full / 2 && delay <= full,
                "attempt {attempt}: {delay:?}"
            );
            previous_top = previous_top.max(delay);
            now += delay;
            core.tick(now);
            assert!(matches!(core.poll_action(), Some(ClientAction::Connect)));
            while core.poll_action().is_some() {}
        }
        assert!(previous_top <= Duration::from_secs(5));
    }

    #[test]
    fn a_redirect_sends_the_next_attempt_to_the_directory_s_first_server() {
        let mut core = welcomed_core(3);
        core.set_fallback_servers(vec!["dead:1".into()]);
        let mut now = Instant::now();
        core.handle(SocketEvent::Disconnected(lost()), now);
        // Attempt 1 (back where it was) starts; the directory then says
        // where the game is now.
        now += Duration::from_secs(10);
        core.tick(now);
        assert_eq!(core.server(), 0);
        core.redirect(vec!["alive:2".into(), "dead:1".into()], now);
        // It fails: the next one goes at once (the list was news), to
        // "alive:2".
        core.handle(SocketEvent::Disconnected(lost()), now);
        assert_eq!(retry_delay(&core, now), Duration::ZERO);
        core.tick(now);
        assert_eq!(core.server(), 1);
        // The same list again is no news: the backoff holds.
        core.redirect(vec!["alive:2".into(), "dead:1".into()], now);
        core.handle(SocketEvent::Disconnected(lost()), now);
        assert!(retry_delay(&core, now) > Duration::ZERO);
        now += Duration::from_secs(10);
        core.tick(now);
        assert_eq!(core.server(), 1, "still the directory's first");
    }
}
