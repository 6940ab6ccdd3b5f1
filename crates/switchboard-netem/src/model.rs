//! What the link does to each packet, as a state machine with time passed
//! in (no IO): delay, jitter with or without reordering, random and bursty
//! loss (Gilbert-Elliott), duplication, a bandwidth limit with a bounded
//! queue, and outage windows. Seeded: the same seed and the same packets
//! give the same fates.

use std::time::{Duration, Instant};

/// Bursty loss: a two-state chain (Gilbert-Elliott). In the good state
/// packets are lost with `loss_good`, in the bad state with `loss_bad`;
/// before each packet the chain moves good → bad with `p_enter_bad` and
/// bad → good with `p_leave_bad`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GilbertElliott {
    /// Chance a packet in the good state moves the chain to bad.
    pub p_enter_bad: f64,
    /// Chance a packet in the bad state moves the chain back to good.
    pub p_leave_bad: f64,
    /// Loss in the good state.
    pub loss_good: f64,
    /// Loss in the bad state.
    pub loss_bad: f64,
}

/// One direction of the link. Every field says its default.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// One-way delay (default 0).
    pub delay: Duration,
    /// Up to this much more delay, drawn uniformly per packet (default 0).
    pub jitter: Duration,
    /// Whether jitter may reorder packets (default false: a packet never
    /// arrives before one sent earlier, as on most real paths).
    pub reorder: bool,
    /// Chance a packet is lost, independently (default 0).
    pub loss: f64,
    /// Bursty loss on top of `loss` (default none).
    pub bursts: Option<GilbertElliott>,
    /// Chance a packet arrives twice (default 0).
    pub duplicate: f64,
    /// Bytes a second the link carries (default none: unlimited). Packets
    /// wait their turn in a queue of `queue_packets`.
    pub bandwidth: Option<u64>,
    /// Packets waiting for the bandwidth at most (default 1,000); past it
    /// a packet is dropped (tail drop), as a router's queue does.
    pub queue_packets: usize,
    /// Windows (from the link's start, and how long) in which nothing gets
    /// through (default none).
    pub outages: Vec<(Duration, Duration)>,
    /// The seed of every random choice (default 1).
    pub seed: u64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            reorder: false,
            loss: 0.0,
            bursts: None,
            duplicate: 0.0,
            bandwidth: None,
            queue_packets: 1000,
            outages: Vec::new(),
            seed: 1,
        }
    }
}

/// Why a packet did not get through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Lost at random (`loss`, or a burst).
    Lost,
    /// The bandwidth queue was full.
    QueueFull,
    /// It was sent during an outage.
    Outage,
}

/// A packet's fate: when it arrives (twice when duplicated), or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Delivered at these instants (one, or two when duplicated).
    Arrives(Vec<Instant>),
    /// Dropped, and why.
    Dropped(Dropped),
}

/// The state of one direction.
#[derive(Debug)]
pub struct Direction {
    config: LinkConfig,
    start: Instant,
    rng: u64,
    bad: bool,
    /// When the bandwidth is free again, and the departures still queued.
    free_at: Instant,
    queued: std::collections::VecDeque<Instant>,
    /// The latest arrival so far (packets keep their order unless
    /// `reorder`).
    last_arrival: Instant,
}

impl Direction {
    /// A direction of `config`, starting at `start`.
    pub fn new(config: LinkConfig, start: Instant) -> Self {
        let rng = splitmix(config.seed) | 1;
        Self {
            config,
            start,
            rng,
            bad: false,
            free_at: start,
            queued: std::collections::VecDeque::new(),
            last_arrival: start,
        }
    }

    /// The settings.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// A packet of `len` bytes enters the link at `now`: its fate.
    pub fn admit(&mut self, len: usize, now: Instant) -> Fate {
        let since = now.saturating_duration_since(self.start);
        if self
            .config
            .outages
            .iter()
            .any(|(from, long)| since >= *from && since < *from + *long)
        {
            return Fate::Dropped(Dropped::Outage);
        }
        if self.lost() {
            return Fate::Dropped(Dropped::Lost);
        }
        // The bandwidth: the packet leaves once those before it have.
        let departs = match self.config.bandwidth {
            Some(rate) => {
                while self.queued.front().is_some_and(|at| *at <= now) {
                    self.queued.pop_front();
                }
                if self.queued.len() >= self.config.queue_packets.max(1) {
                    return Fate::Dropped(Dropped::QueueFull);
                }
                let on_wire = Duration::from_secs_f64(len as f64 / rate.max(1) as f64);
                let departs = self.free_at.max(now) + on_wire;
                self.free_at = departs;
                self.queued.push_back(departs);
                departs
            }
            None => now,
        };
        let first = self.arrival(departs);
        let mut arrivals = vec![first];
        if self.chance(self.config.duplicate) {
            arrivals.push(self.arrival(departs));
        }
        Fate::Arrives(arrivals)
    }

    fn arrival(&mut self, departs: Instant) -> Instant {
        let jitter = self.config.jitter.mul_f64(self.uniform());
        let mut at = departs + self.config.delay + jitter;
        if !self.config.reorder {
            at = at.max(self.last_arrival);
        }
        self.last_arrival = self.last_arrival.max(at);
        at
    }

    /// Whether the next packet is lost: the burst chain moves first.
    fn lost(&mut self) -> bool {
        let mut loss = self.config.loss;
        if let Some(ge) = self.config.bursts {
            let flip = if self.bad {
                ge.p_leave_bad
            } else {
                ge.p_enter_bad
            };
            if self.chance(flip) {
                self.bad = !self.bad;
            }
            let burst = if self.bad { ge.loss_bad } else { ge.loss_good };
            loss = 1.0 - (1.0 - loss) * (1.0 - burst);
        }
        self.chance(loss)
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.uniform() < p
    }

    /// A uniform draw in [0, 1) (xorshift64*).
    fn uniform(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let x = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: LinkConfig, packets: usize, every: Duration) -> (usize, Vec<Duration>) {
        let t0 = Instant::now();
        let mut link = Direction::new(config, t0);
        let (mut lost, mut delays) = (0, Vec::new());
        for i in 0..packets {
            let now = t0 + every * i as u32;
            match link.admit(100, now) {
                Fate::Arrives(at) => delays.push(at[0] - now),
                Fate::Dropped(_) => lost += 1,
            }
        }
        (lost, delays)
    }

    #[test]
    fn delay_and_jitter_stay_within_what_was_asked_and_keep_order() {
        let config = LinkConfig {
            delay: Duration::from_millis(25),
            jitter: Duration::from_millis(4),
            ..LinkConfig::default()
        };
        let t0 = Instant::now();
        let mut link = Direction::new(config, t0);
        let mut last = t0;
        for i in 0..10_000u32 {
            let now = t0 + Duration::from_micros(100) * i;
            let Fate::Arrives(at) = link.admit(100, now) else {
                panic!("nothing is lost")
            };
            let delay = at[0] - now;
            assert!(delay >= Duration::from_millis(25), "{delay:?}");
            assert!(
                delay <= Duration::from_millis(29) + Duration::from_micros(100),
                "{delay:?}"
            );
            assert!(at[0] >= last, "in order");
            last = at[0];
        }
    }

    #[test]
    fn random_loss_is_near_its_rate_and_a_seed_repeats_it() {
        let config = LinkConfig {
            loss: 0.02,
            seed: 7,
            ..LinkConfig::default()
        };
        let (lost, _) = run(config.clone(), 100_000, Duration::from_micros(10));
        assert!((1_800..2_200).contains(&lost), "{lost} of 100,000");
        assert_eq!(run(config, 100_000, Duration::from_micros(10)).0, lost);
    }

    #[test]
    fn bursty_loss_comes_in_runs() {
        let config = LinkConfig {
            bursts: Some(GilbertElliott {
                p_enter_bad: 0.01,
                p_leave_bad: 0.25,
                loss_good: 0.0,
                loss_bad: 0.8,
            }),
            ..LinkConfig::default()
        };
        let t0 = Instant::now();
        let mut link = Direction::new(config, t0);
        let fates: Vec<bool> = (0..100_000)
            .map(|i| {
                matches!(
                    link.admit(100, t0 + Duration::from_micros(i)),
                    Fate::Dropped(_)
                )
            })
            .collect();
        let lost = fates.iter().filter(|l| **l).count();
        // Stationary: bad a fraction 0.01 / (0.01 + 0.25) of the time.
        let expected = 100_000.0 * 0.8 * 0.01 / 0.26;
        assert!((lost as f64 - expected).abs() < expected * 0.15, "{lost}");
        let after_a_loss = fates.windows(2).filter(|w| w[0] && w[1]).count() as f64 / lost as f64;
        assert!(
            after_a_loss > 0.4,
            "a loss follows a loss {after_a_loss:.2} of the time"
        );
    }

    #[test]
    fn the_bandwidth_queues_then_drops_past_its_bound() {
        let config = LinkConfig {
            bandwidth: Some(100_000),
            queue_packets: 10,
            ..LinkConfig::default()
        };
        let t0 = Instant::now();
        let mut link = Direction::new(config, t0);
        // 20 packets of 1,000 bytes at once: 10 ms each on the wire.
        let fates: Vec<Fate> = (0..20).map(|_| link.admit(1000, t0)).collect();
        let arrived: Vec<Instant> = fates
            .iter()
            .filter_map(|f| match f {
                Fate::Arrives(at) => Some(at[0]),
                Fate::Dropped(_) => None,
            })
            .collect();
        assert_eq!(arrived.len(), 10);
        assert_eq!(arrived[9] - t0, Duration::from_millis(100));
        assert!(fates.contains(&Fate::Dropped(Dropped::QueueFull)));
    }

    #[test]
    fn an_outage_drops_everything_inside_its_window_only() {
        let config = LinkConfig {
            outages: vec![(Duration::from_secs(1), Duration::from_secs(2))],
            ..LinkConfig::default()
        };
        let t0 = Instant::now();
        let mut link = Direction::new(config, t0);
        let at = |ms| t0 + Duration::from_millis(ms);
        assert!(matches!(link.admit(1, at(999)), Fate::Arrives(_)));
        assert_eq!(link.admit(1, at(1000)), Fate::Dropped(Dropped::Outage));
        assert_eq!(link.admit(1, at(2999)), Fate::Dropped(Dropped::Outage));
        assert!(matches!(link.admit(1, at(3000)), Fate::Arrives(_)));
    }

    #[test]
    fn duplicates_arrive_twice_and_reordering_only_when_asked() {
        let config = LinkConfig {
            duplicate: 1.0,
            jitter: Duration::from_millis(10),
            reorder: true,
            ..LinkConfig::default()
        };
        let t0 = Instant::now();
        let mut link = Direction::new(config, t0);
        let mut out_of_order = 0;
        let mut last = t0;
        for i in 0..1000u32 {
            let Fate::Arrives(at) = link.admit(100, t0 + Duration::from_micros(100) * i) else {
                panic!()
            };
            assert_eq!(at.len(), 2);
            if at[0] < last {
                out_of_order += 1;
            }
            last = at[0];
        }
        assert!(out_of_order > 100, "{out_of_order}");
    }
}
