//! [`Pacer`]: when a busy server's queued deliveries leave, so that a peer's
//! messages share writes.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use super::{EndpointHandle, IdBuildHasher, PeerId};

/// How a [`Pacer`] paces; each field says its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacerConfig {
    /// The longest a delivery waits to share a write when the server is
    /// busy (default 5 ms; zero: never waits). A longer wait saves writes
    /// and adds its length to every delivery's latency: on two cores shared
    /// with 1,000 players' clients, 5 ms gave a p99 4-6 ms lower than 10 ms
    /// for 10-20% more CPU (`docs/PERFORMANCE.md`).
    pub max_wait: Duration,
    /// Deliveries a second (messages times recipients) under which every
    /// delivery leaves at once (default 100,000), unless the server falls
    /// behind (next field).
    pub quiet_rate: u32,
    /// How long, on average over 100 ms, the events a server's loop takes
    /// may have waited for it ([`Pacer::took`]) before the server counts as
    /// falling behind (default 2 ms; zero: the rate alone decides). While it
    /// is behind, deliveries wait to share writes whatever the rate, a step
    /// of an eighth of `max_wait` longer every 100 ms; once its events wait
    /// under two fifths of this, a tenth of a step shorter every 100 ms (it
    /// caught up by sharing writes, and would fall behind again at once
    /// without them). So a server that keeps up writes at once however dear
    /// its writes are, and one that cannot (a machine whose kernel makes
    /// each write dear, or whose cores it shares) saves writes until it can.
    pub behind_after: Duration,
    /// A flush of at least this many peers is shared out among the
    /// runtime's worker threads (default 16; 0: every write on the caller's
    /// thread). Each share is at least half of it, so that a share's writes
    /// outweigh the cost of the task that carries it. A loopback write that
    /// wakes its reader costs 5-18 us on a VM (`docs/PERFORMANCE.md`), so
    /// one thread writing a round to hundreds of peers makes the last of
    /// them wait milliseconds for the first; shared, the round ends sooner.
    /// Each peer's frames still leave in order: its queue's lock orders the
    /// writes.
    pub split_flush_at: usize,
}

impl PacerConfig {
    /// Tick mode: every peer's deliveries wait to share one write, at most
    /// one write per peer every `1 / hz` seconds, at any rate past a few
    /// deliveries a second (a busy relay's CPU per delivery falls by about
    /// two fifths at 20 Hz, each delivery waiting up to a tick:
    /// `docs/PERFORMANCE.md`). Each
    /// peer's tick starts with its first waiting delivery, so the writes of
    /// a round are spread, not all at one instant. A rate of zero or less
    /// (or not a number) is taken as 1 Hz.
    pub fn tick(hz: f64) -> Self {
        let hz = if hz.is_finite() && hz > 0.0 { hz } else { 1.0 };
        Self {
            max_wait: Duration::from_secs_f64(1.0 / hz),
            quiet_rate: 0,
            behind_after: Duration::ZERO,
            ..Self::default()
        }
    }
}

impl Default for PacerConfig {
    fn default() -> Self {
        Self {
            max_wait: Duration::from_millis(5),
            quiet_rate: 100_000,
            behind_after: Duration::from_millis(2),
            split_flush_at: 16,
        }
    }
}

/// When queued deliveries leave. A server queues what it sends
/// ([`EndpointHandle::queue_encoded_to_many`]), tells the pacer
/// ([`queued`](Self::queued)), and after handling what arrived together
/// calls [`flush_due`](Self::flush_due), waking again at
/// [`next_due`](Self::next_due).
///
/// While the server is quiet, everything leaves at once: each peer gets what
/// one batch of events sent it in one write. Busier (past
/// [`PacerConfig::quiet_rate`]), each peer's deliveries leave a wait after
/// its first one, in proportion to the load and reaching
/// [`PacerConfig::max_wait`] at four times the quiet rate, so that a peer's
/// messages share a write: one system call for the server and one wake-up
/// for the peer instead of one per message, which is what lets a busy
/// server keep up. The waits run from each peer's first delivery, so the
/// writes are spread over time rather than coming in rounds of every peer
/// at once. The pacer also watches the server keep up: a server whose events
/// wait longer than [`PacerConfig::behind_after`] for it waits longer to
/// write, whatever the rate (the wait is the larger of the two).
#[derive(Debug)]
pub struct Pacer {
    config: PacerConfig,
    /// Deliveries counted since `window_at`; the rate is read every 100 ms.
    window_at: Instant,
    window_count: u64,
    /// The events' waits ([`took`](Self::took)) since `window_at`: their
    /// sum and how many.
    window_behind: (Duration, u32),
    /// The wait falling behind asks for (the rate's is worked out anew
    /// each window).
    behind_wait: Duration,
    wait: Duration,
    queued: HashSet<PeerId, IdBuildHasher>,
    /// Peers with deliveries waiting, in the order of their first one.
    order: VecDeque<(PeerId, Instant)>,
}

/// How often the delivery rate is read.
const WINDOW: Duration = Duration::from_millis(100);

impl Pacer {
    /// Nothing queued; quiet.
    pub fn new(config: PacerConfig, now: Instant) -> Self {
        Self {
            config,
            window_at: now,
            window_count: 0,
            window_behind: (Duration::ZERO, 0),
            behind_wait: Duration::ZERO,
            wait: Duration::ZERO,
            queued: HashSet::default(),
            order: VecDeque::new(),
        }
    }

    /// The wait a delivery queued now gets.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Deliveries were queued for `peers` at `now` (`deliveries` counts
    /// every recipient, those reached otherwise too, for the rate).
    pub fn queued(&mut self, peers: &[PeerId], deliveries: usize, now: Instant) {
        for peer in peers {
            if self.queued.insert(*peer) {
                self.order.push_back((*peer, now));
            }
        }
        self.window_count += deliveries as u64;
        let elapsed = now.saturating_duration_since(self.window_at);
        if elapsed < WINDOW {
            return;
        }
        let rate = self.window_count as f64 / elapsed.as_secs_f64();
        let quiet = f64::from(self.config.quiet_rate.max(1));
        let load = ((rate - quiet) / (3.0 * quiet)).clamp(0.0, 1.0);
        let (sum, count) = std::mem::take(&mut self.window_behind);
        let behind = sum.checked_div(count).unwrap_or_default();
        self.behind_wait = self.next_behind_wait(behind);
        self.wait = self.config.max_wait.mul_f64(load).max(self.behind_wait);
        tracing::trace!(
            rate = rate as u64,
            behind_us = behind.as_micros() as u64,
            wait_us = self.wait.as_micros() as u64,
            "pacer window"
        );
        self.window_at = now;
        self.window_count = 0;
    }

    /// The server's loop took events that had waited up to `waited` for it
    /// ([`EndpointStream::take_queue_wait`](super::EndpointStream::take_queue_wait)):
    /// what tells the pacer whether the server keeps up
    /// ([`PacerConfig::behind_after`]). Called once for each round of events
    /// taken.
    pub fn took(&mut self, waited: Duration) {
        let (sum, count) = &mut self.window_behind;
        *sum = sum.saturating_add(waited);
        *count = count.saturating_add(1);
    }

    /// The wait after a window whose events waited `behind` on average: a
    /// step up past [`PacerConfig::behind_after`], a tenth of a step down
    /// under two fifths of it, else unchanged.
    fn next_behind_wait(&self, behind: Duration) -> Duration {
        let high = self.config.behind_after;
        let step = self.config.max_wait / 8;
        if high.is_zero() {
            Duration::ZERO
        } else if behind > high {
            (self.behind_wait + step).min(self.config.max_wait)
        } else if behind < high.mul_f64(0.4) {
            // Down ten times slower than up: a server that caught up by
            // sharing writes would fall behind again at once without them.
            self.behind_wait.saturating_sub(step / 10)
        } else {
            self.behind_wait
        }
    }

    /// When the oldest waiting delivery should leave.
    pub fn next_due(&self) -> Option<Instant> {
        self.order.front().map(|(_, at)| *at + self.wait)
    }

    /// Writes what waits for the peers whose wait is over at `now` (for
    /// every peer at `None`: a server stopping, all on this thread), one
    /// write each; a round of [`PacerConfig::split_flush_at`] peers or more
    /// is shared with the runtime's other workers.
    pub fn flush_due(&mut self, handle: &EndpointHandle, now: Option<Instant>) {
        let due = self.take_due(now);
        self.flush(handle, due, now.is_some());
    }

    /// The peers whose wait is over at `now` (every peer at `None`), taken
    /// off the wait: for a server that puts something more on their queues
    /// before [`flush`](Self::flush) writes them (a relay's batches).
    pub fn take_due(&mut self, now: Option<Instant>) -> Vec<PeerId> {
        let mut due = Vec::new();
        while let Some((peer, at)) = self.order.front().copied() {
            if now.is_some_and(|now| at + self.wait > now) {
                break;
            }
            self.order.pop_front();
            self.queued.remove(&peer);
            due.push(peer);
        }
        due
    }

    /// Writes what waits for `due`, one write each; with `share`, a round
    /// of [`PacerConfig::split_flush_at`] peers or more is shared with the
    /// runtime's other workers.
    pub fn flush(&self, handle: &EndpointHandle, mut due: Vec<PeerId>, share: bool) {
        if due.is_empty() {
            return;
        }
        if share {
            self.share_out(handle, &mut due);
        }
        handle.flush_peers(due);
    }

    /// Hands all but the first share of `due` to tasks on the runtime's
    /// other workers, when it is long enough to be worth it; the caller
    /// writes what is left in `due`.
    fn share_out(&self, handle: &EndpointHandle, due: &mut Vec<PeerId>) {
        let least = self.config.split_flush_at;
        if least == 0 || due.len() < least {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shares = runtime
            .metrics()
            .num_workers()
            .min(due.len() / least.div_ceil(2));
        if shares < 2 {
            return;
        }
        let share = due.len().div_ceil(shares);
        while due.len() > share {
            let rest = due.split_off(due.len() - share);
            let handle = handle.clone();
            runtime.spawn(async move { handle.flush_peers(rest) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_means_at_once_and_load_means_a_wait_in_proportion() {
        let t0 = Instant::now();
        let config = PacerConfig {
            max_wait: Duration::from_millis(10),
            quiet_rate: 100_000,
            behind_after: Duration::ZERO,
            ..PacerConfig::default()
        };
        let mut pacer = Pacer::new(config, t0);
        let peers: Vec<PeerId> = (1..=10).map(PeerId).collect();
        // 50,000 deliveries a second: quiet.
        for ms in 0..=100 {
            pacer.queued(&peers, 50, t0 + Duration::from_millis(ms));
        }
        assert_eq!(pacer.wait(), Duration::ZERO);
        assert_eq!(pacer.next_due(), Some(t0));
        // 250,000 a second: half way from the quiet rate to four times it.
        let t1 = t0 + Duration::from_millis(100);
        for ms in 1..=100 {
            pacer.queued(&peers, 250, t1 + Duration::from_millis(ms));
        }
        let near = |a: Duration, b: Duration| a.abs_diff(b) < Duration::from_micros(10);
        assert!(
            near(pacer.wait(), Duration::from_millis(5)),
            "{:?}",
            pacer.wait()
        );
        // Each peer once, in the order of its first delivery.
        assert_eq!(pacer.order.len(), 10);
        assert!(near(
            pacer.next_due().unwrap() - t0,
            Duration::from_millis(5)
        ));
        // 1,000,000 a second: the longest wait.
        let t2 = t1 + Duration::from_millis(100);
        for ms in 1..=100 {
            pacer.queued(&peers, 1000, t2 + Duration::from_millis(ms));
        }
        assert!(
            near(pacer.wait(), Duration::from_millis(10)),
            "{:?}",
            pacer.wait()
        );
    }

    #[test]
    fn tick_mode_waits_a_whole_tick_at_a_modest_rate() {
        let t0 = Instant::now();
        let mut pacer = Pacer::new(PacerConfig::tick(20.0), t0);
        let peers: Vec<PeerId> = (1..=3).map(PeerId).collect();
        // 300 deliveries a second: far under the default quiet rate.
        for ms in (0..=200).step_by(10) {
            pacer.queued(&peers, 3, t0 + Duration::from_millis(ms));
        }
        assert_eq!(pacer.wait(), Duration::from_millis(50));
        assert_eq!(
            pacer.next_due(),
            Some(t0 + Duration::from_millis(50)),
            "the first peer's tick runs from its first delivery"
        );
        assert_eq!(PacerConfig::tick(0.0).max_wait, Duration::from_secs(1));
    }

    #[test]
    fn a_server_whose_events_wait_for_it_makes_deliveries_wait_whatever_the_rate() {
        let t0 = Instant::now();
        let config = PacerConfig {
            max_wait: Duration::from_millis(8),
            quiet_rate: 100_000,
            behind_after: Duration::from_millis(1),
            ..PacerConfig::default()
        };
        let mut pacer = Pacer::new(config, t0);
        let peers = [PeerId(1)];
        let us = Duration::from_micros;
        // One window of 100 ms at a quiet rate in which the loop took three
        // rounds of events, which had waited `waits` for it.
        let window = |pacer: &mut Pacer, n: u64, waits: [u64; 3]| {
            for waited in waits {
                pacer.took(us(waited));
            }
            pacer.queued(&peers, 1, t0 + Duration::from_millis(100 * n));
            pacer.wait()
        };
        let ms = Duration::from_millis;
        for (n, waits, wait, why) in [
            (1, [20, 50, 30], ms(0), "keeping up: at once"),
            (2, [900, 1500, 2000], ms(1), "behind: a step up"),
            (3, [100, 100, 3000], ms(2), "still behind on average"),
            (4, [500, 600, 700], ms(2), "between the bounds: held"),
        ] {
            assert_eq!(window(&mut pacer, n, waits), wait, "{why}");
        }
        for n in 5..20 {
            window(&mut pacer, n, [5000, 5000, 5000]);
        }
        assert_eq!(pacer.wait(), ms(8), "never past max_wait");
        let caught_up = window(&mut pacer, 20, [100, 200, 300]);
        assert_eq!(caught_up, us(7900), "caught up: a tenth of a step down");
        for n in 21..30 {
            window(&mut pacer, n, [0, 0, 0]);
        }
        assert_eq!(pacer.wait(), ms(7), "a step down a second");
        let mut off = Pacer::new(
            PacerConfig {
                behind_after: Duration::ZERO,
                ..config
            },
            t0,
        );
        assert_eq!(
            window(&mut off, 1, [9000, 9000, 9000]),
            ms(0),
            "zero turns it off"
        );
    }
}
