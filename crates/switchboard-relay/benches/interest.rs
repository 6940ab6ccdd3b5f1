//! Interest by distance at scale, in process (no sockets): `PLAYERS`
//! players (default 10,000) spread over one world, ticks in which a share
//! of them move a step each; what a tick's view recomputes and recipient
//! lists cost, beside the brute-force baseline in the same run (each mover
//! measured against every player: what a zone with a distance check and
//! no spatial hash does).
//!
//! ```text
//! cargo bench -p switchboard-relay --bench interest            # 10,000 players
//! PLAYERS=2000 cargo bench -p switchboard-relay --bench interest
//! ```

use std::time::{Duration, Instant};

use switchboard_relay::interest::{InterestConfig, World};

/// A small, seeded generator: the same world every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

fn main() {
    let players: u32 = std::env::var("PLAYERS")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(10_000);
    let config = InterestConfig::default();
    // About 20 players within the enter radius of each (50 units), as a
    // busy open world has.
    let side = (players as f32 * std::f32::consts::PI * 2500.0 / 20.0).sqrt();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut positions: Vec<[f32; 3]> = (0..players)
        .map(|_| [rng.next() * side, 0.0, rng.next() * side])
        .collect();
    let mut world = World::new(config);
    let start = Instant::now();
    for (id, at) in positions.iter().enumerate() {
        world.enter(id as u32 + 1, *at);
    }
    let entered = start.elapsed();
    let seen: usize = (1..=players).map(|id| world.seen_by(id).count()).sum();
    println!(
        "{players} players on {side:.0} x {side:.0}: entered in {:.1} ms, {:.1} in view each",
        entered.as_secs_f64() * 1e3,
        seen as f64 / players as f64
    );
    println!(
        "{:>7} {:>7} {:>12} {:>12} {:>14} {:>12} {:>8}",
        "moving", "movers", "tick p50 ms", "tick max ms", "per mover µs", "brute ms", "ratio"
    );
    for percent in [1u32, 5, 10, 20] {
        let movers = (players * percent / 100).max(1);
        let mut ticks = Vec::new();
        let mut brute = Vec::new();
        for tick in 0..40u32 {
            // A different share moves each tick, a step of 1.5 units (past
            // `min_move`: every mover recomputes its view).
            let ids: Vec<u32> = (0..movers)
                .map(|i| (i * 97 + tick * 7919) % players + 1)
                .collect();
            for &id in &ids {
                let at = &mut positions[(id - 1) as usize];
                let angle = rng.next() * std::f32::consts::TAU;
                at[0] = (at[0] + 1.5 * angle.cos()).clamp(0.0, side);
                at[2] = (at[2] + 1.5 * angle.sin()).clamp(0.0, side);
            }
            let start = Instant::now();
            let mut delivered = 0usize;
            for &id in &ids {
                let (_, recipients) = world.moved(id, positions[(id - 1) as usize]);
                delivered += recipients.len();
            }
            ticks.push(start.elapsed());
            std::hint::black_box(delivered);
            // The baseline: each mover against every player.
            let start = Instant::now();
            let enter2 = config.enter_radius * config.enter_radius;
            let mut near = 0usize;
            for &id in &ids {
                let me = positions[(id - 1) as usize];
                for other in &positions {
                    let (dx, dz) = (me[0] - other[0], me[2] - other[2]);
                    near += usize::from(dx * dx + dz * dz <= enter2);
                }
            }
            brute.push(start.elapsed());
            std::hint::black_box(near);
        }
        let (p50, max) = spread(&mut ticks);
        let (brute50, _) = spread(&mut brute);
        println!(
            "{:>6}% {:>7} {:>12.3} {:>12.3} {:>14.3} {:>12.3} {:>7.1}x",
            percent,
            movers,
            ms(p50),
            ms(max),
            ms(p50) * 1e3 / movers as f64,
            ms(brute50),
            ms(brute50) / ms(p50)
        );
    }
    println!("views recomputed: {}", world.recomputes());
}

fn spread(times: &mut [Duration]) -> (Duration, Duration) {
    times.sort();
    (times[times.len() / 2], times[times.len() - 1])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
