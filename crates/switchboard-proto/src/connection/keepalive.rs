//! The connection's one timer, as a decision without a clock: given when
//! the peer was last heard and when a frame last went out, is the peer idle,
//! is a keep-alive ping due, and when to look again.

use std::ops::Add;
use std::time::Duration;

/// What the timer decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick<Instant> {
    /// Nothing heard for `idle_timeout` while the reader waited on the
    /// socket: close the connection as idle.
    Idle,
    /// Send a ping now, and look again at `next`.
    Ping {
        /// When to look again.
        next: Instant,
    },
    /// Nothing to do before `next`.
    Wait {
        /// When to look again.
        next: Instant,
    },
}

/// The keep-alive and idle rules.
///
/// `heard` is when the peer was last heard from, or `None` while the reader
/// is not waiting on the socket (it waits for the owner to take its events,
/// or it has ended): time the owner takes is not the peer's silence. `sent`
/// is when a frame last went out: only a frame that went out puts the next
/// ping off.
pub fn tick<Instant: Copy + Ord + Add<Duration, Output = Instant>>(
    now: Instant,
    heard: Option<Instant>,
    sent: Instant,
    keepalive_interval: Duration,
    idle_timeout: Duration,
) -> Tick<Instant> {
    let mut next = now + keepalive_interval.min(idle_timeout);
    if let Some(heard) = heard {
        let due = heard + idle_timeout;
        if now >= due {
            return Tick::Idle;
        }
        next = next.min(due);
    }
    let due = sent + keepalive_interval;
    if now >= due {
        return Tick::Ping {
            next: next.min(now + keepalive_interval),
        };
    }
    Tick::Wait {
        next: next.min(due),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const PING: Duration = Duration::from_secs(5);
    const IDLE: Duration = Duration::from_secs(30);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_silent_peer_is_idle_after_the_idle_timeout() {
        let t0 = Instant::now();
        assert!(matches!(
            tick(t0 + secs(29), Some(t0), t0 + secs(29), PING, IDLE),
            Tick::Wait { .. }
        ));
        assert_eq!(
            tick(t0 + secs(30), Some(t0), t0 + secs(30), PING, IDLE),
            Tick::Idle
        );
    }

    #[test]
    fn a_reader_waiting_on_its_owner_is_never_idle() {
        let t0 = Instant::now();
        let later = t0 + secs(300);
        assert!(matches!(
            tick(later, None, later, PING, IDLE),
            Tick::Wait { .. }
        ));
    }

    #[test]
    fn a_ping_goes_out_after_a_keepalive_interval_without_sending() {
        let t0 = Instant::now();
        assert_eq!(
            tick(t0 + secs(4), Some(t0 + secs(4)), t0, PING, IDLE),
            Tick::Wait { next: t0 + secs(5) }
        );
        assert_eq!(
            tick(t0 + secs(5), Some(t0 + secs(5)), t0, PING, IDLE),
            Tick::Ping {
                next: t0 + secs(10)
            }
        );
    }

    #[test]
    fn regression_only_a_frame_sent_puts_the_ping_off_not_one_heard() {
        // Heard all the time, sent nothing: the pings still go out.
        let t0 = Instant::now();
        let now = t0 + secs(7);
        assert!(matches!(
            tick(now, Some(now), t0, PING, IDLE),
            Tick::Ping { .. }
        ));
        // Sent a frame at 6 s: the ping waits until 11 s.
        assert_eq!(
            tick(now, Some(now), t0 + secs(6), PING, IDLE),
            Tick::Wait {
                next: t0 + secs(11)
            }
        );
    }

    #[test]
    fn the_timer_looks_again_at_the_idle_deadline_when_it_comes_first() {
        let t0 = Instant::now();
        let (ping, idle) = (secs(10), secs(12));
        let now = t0 + secs(9);
        assert_eq!(
            tick(now, Some(t0 + secs(1)), now, ping, idle),
            Tick::Wait {
                next: t0 + secs(13)
            }
        );
    }
}
