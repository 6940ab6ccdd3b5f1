//! [`Pacer`]: when a busy server's queued deliveries leave, so that a peer's
//! messages share writes.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{IdBuildHasher, PeerId, ServerHandle};

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
    /// delivery leaves at once (default 100,000), unless writing costs too
    /// much (next field).
    pub quiet_rate: u32,
    /// The share of wall time, in percent, the server may spend in its
    /// writes before deliveries wait to share them whatever the rate
    /// (default 50; 0: the rate alone decides). Writes shared out among
    /// workers ([`split_flush_at`](Self::split_flush_at)) count in full, so
    /// this is writing time against one thread's time. Past it the wait grows by
    /// an eighth of `max_wait` every 100 ms, under two fifths of it the wait
    /// shrinks again: on a machine where a write costs more (a VM whose
    /// kernel is slow), the waits follow what writing costs there.
    pub write_share_percent: u8,
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

impl Default for PacerConfig {
    fn default() -> Self {
        Self {
            max_wait: Duration::from_millis(5),
            quiet_rate: 100_000,
            write_share_percent: 50,
            split_flush_at: 16,
        }
    }
}

/// When queued deliveries leave. A server queues what it sends
/// ([`ServerHandle::queue_encoded_to_many`]), tells the pacer
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
/// at once. The pacer also times its own writes: a server that spends more
/// than [`PacerConfig::write_share_percent`] of its time writing waits
/// longer, whatever the rate (the wait is the larger of the two).
#[derive(Debug)]
pub struct Pacer {
    config: PacerConfig,
    /// Deliveries counted since `window_at`; the rate is read every 100 ms.
    window_at: Instant,
    window_count: u64,
    /// Time spent in `flush_due`'s writes since `window_at`, on this thread.
    window_writing: Duration,
    /// Nanoseconds spent in the writes handed to other workers, taken into
    /// `window_writing` at each window.
    shared_writing: Arc<AtomicU64>,
    /// The wait the writes' cost asks for (the rate's is worked out anew
    /// each window).
    cost_wait: Duration,
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
            window_writing: Duration::ZERO,
            shared_writing: Arc::default(),
            cost_wait: Duration::ZERO,
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
        let shared = self.shared_writing.swap(0, Ordering::Relaxed);
        let writing = self.window_writing + Duration::from_nanos(shared);
        let share = writing.as_secs_f64() / elapsed.as_secs_f64();
        self.cost_wait = self.next_cost_wait(share);
        self.wait = self.config.max_wait.mul_f64(load).max(self.cost_wait);
        self.window_at = now;
        self.window_count = 0;
        self.window_writing = Duration::ZERO;
    }

    /// The cost-driven wait after a window in which writing took `share`
    /// of the time: a step up past the configured share, a step down
    /// under two fifths of it, else unchanged.
    fn next_cost_wait(&self, share: f64) -> Duration {
        let high = f64::from(self.config.write_share_percent) / 100.0;
        let step = self.config.max_wait / 8;
        if high <= 0.0 {
            Duration::ZERO
        } else if share > high {
            (self.cost_wait + step).min(self.config.max_wait)
        } else if share < high * 0.4 {
            self.cost_wait.saturating_sub(step)
        } else {
            self.cost_wait
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
    pub fn flush_due(&mut self, handle: &ServerHandle, now: Option<Instant>) {
        let mut due = Vec::new();
        while let Some((peer, at)) = self.order.front().copied() {
            if now.is_some_and(|now| at + self.wait > now) {
                break;
            }
            self.order.pop_front();
            self.queued.remove(&peer);
            due.push(peer);
        }
        if due.is_empty() {
            return;
        }
        if now.is_some() {
            self.share_out(handle, &mut due);
        }
        handle.flush_peers(due);
        if let Some(began) = now {
            self.window_writing += Instant::now().saturating_duration_since(began);
        }
    }

    /// Hands all but the first share of `due` to tasks on the runtime's
    /// other workers, when it is long enough to be worth it; the caller
    /// writes what is left in `due`.
    fn share_out(&self, handle: &ServerHandle, due: &mut Vec<PeerId>) {
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
            let (handle, writing) = (handle.clone(), self.shared_writing.clone());
            runtime.spawn(async move {
                let began = Instant::now();
                handle.flush_peers(rest);
                let took = began.elapsed().as_nanos().try_into().unwrap_or(u64::MAX);
                writing.fetch_add(took, Ordering::Relaxed);
            });
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
            write_share_percent: 0,
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
    fn writes_that_take_too_much_of_the_time_make_deliveries_wait_whatever_the_rate() {
        let t0 = Instant::now();
        let config = PacerConfig {
            max_wait: Duration::from_millis(8),
            quiet_rate: 100_000,
            write_share_percent: 25,
            ..PacerConfig::default()
        };
        let mut pacer = Pacer::new(config, t0);
        let peers = [PeerId(1)];
        // One window of 100 ms at a quiet rate in which writing took `ms`.
        let window = |pacer: &mut Pacer, n: u64, writing_ms: u64| {
            pacer.window_writing = Duration::from_millis(writing_ms);
            pacer.queued(&peers, 1, t0 + Duration::from_millis(100 * n));
            pacer.wait()
        };
        let ms = Duration::from_millis;
        assert_eq!(window(&mut pacer, 1, 5), ms(0), "cheap writes: at once");
        assert_eq!(window(&mut pacer, 2, 60), ms(1), "60% writing: a step up");
        assert_eq!(window(&mut pacer, 3, 30), ms(2), "still past 25%");
        assert_eq!(window(&mut pacer, 4, 15), ms(2), "between the bounds: held");
        for n in 5..20 {
            window(&mut pacer, n, 90);
        }
        assert_eq!(pacer.wait(), ms(8), "never past max_wait");
        assert_eq!(window(&mut pacer, 20, 5), ms(7), "under 10%: a step down");
        let mut off = Pacer::new(
            PacerConfig {
                write_share_percent: 0,
                ..config
            },
            t0,
        );
        assert_eq!(window(&mut off, 1, 90), ms(0), "0 turns it off");
    }
}
