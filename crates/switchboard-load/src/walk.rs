//! The load tester's moving mode: bots walk circles over a square world,
//! each on its own circle, at its own phase and direction, so that any bot
//! can tell where any other is at any time. Against a relay with interest
//! by distance, each bot checks what it hears against where the others
//! are: a transform from past the leave radius is a violation, and so is a
//! neighbour that stayed inside the enter radius without being heard.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// How the bots walk, and the relay's radii they check against; each field
/// says its default.
#[derive(Debug, Clone, PartialEq)]
pub struct Walk {
    /// The world's side (default 600 units): circles' centres fall in it.
    pub side: f32,
    /// Walking speed (default 3 units a second).
    pub speed: f32,
    /// The relay's view radius (its `--view-radius`): a bot that stays
    /// inside it must be heard.
    pub enter_radius: f32,
    /// The relay's leave radius: nothing may be heard from past it.
    pub leave_radius: f32,
}

impl Walk {
    /// Bots walking a world of `side` at `speed`, checked against a relay
    /// of view radius `view` (leaving at 1.2 times it, the relay's default).
    pub fn new(side: f32, speed: f32, view: f32) -> Self {
        Self {
            side,
            speed,
            enter_radius: view,
            leave_radius: view * 1.2,
        }
    }

    /// Where bot `index` is `t` seconds after the test's epoch (x, 0, z).
    pub fn position(&self, index: usize, t: f64) -> [f32; 3] {
        let h = mix(index as u64);
        let unit = |bits: u64| (bits & 0xFFFF) as f64 / 65535.0;
        let (cx, cz) = (unit(h) * self.side as f64, unit(h >> 16) * self.side as f64);
        let radius = 5.0 + unit(h >> 32) * 45.0;
        let phase = unit(h >> 48) * std::f64::consts::TAU;
        let turn = if h & (1 << 15) == 0 { 1.0 } else { -1.0 };
        let angle = phase + turn * self.speed as f64 / radius * t;
        [
            (cx + radius * angle.cos()) as f32,
            0.0,
            (cz + radius * angle.sin()) as f32,
        ]
    }
}

/// splitmix64: a bot's index spread over 64 bits.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn distance(a: [f32; 3], b: [f32; 3]) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// Every bot's relay id, by index (0 until its welcome).
#[derive(Debug)]
pub(super) struct Ids(Vec<AtomicU32>);

impl Ids {
    pub(super) fn new(bots: usize) -> Self {
        Self((0..bots).map(|_| AtomicU32::new(0)).collect())
    }

    pub(super) fn set(&self, index: usize, id: u32) {
        self.0[index].store(id, Ordering::Relaxed);
    }

    fn get(&self, index: usize) -> u32 {
        self.0[index].load(Ordering::Relaxed)
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

/// What one bot's checks found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Checked {
    /// Neighbour checks made (a neighbour that stayed in view for a window).
    pub(super) checks: u64,
    /// Of those, neighbours not heard within the window.
    pub(super) unheard: u64,
    /// Transforms heard from past the leave radius.
    pub(super) too_far: u64,
}

impl Walk {
    /// How far a transform may come from: the leave radius, plus how far
    /// both bots walk while it travels (half a second is generous).
    fn farthest(&self) -> f32 {
        self.leave_radius + self.speed
    }

    /// A transform from `at` heard by bot `me` at `t`.
    pub(super) fn check_heard(&self, me: usize, t: f64, at: [f32; 3], checked: &mut Checked) {
        if distance(self.position(me, t), at) > self.farthest() {
            checked.too_far += 1;
        }
    }

    /// Every neighbour that stayed well inside the view radius for the
    /// last `window` must have been heard within it (`heard(id)`: when bot
    /// `me` last heard relay id `id`, seconds after the epoch).
    pub(super) fn check_neighbours(
        &self,
        me: usize,
        t: f64,
        window: Duration,
        ids: &Ids,
        heard: impl Fn(u32) -> Option<f64>,
        checked: &mut Checked,
    ) {
        let window = window.as_secs_f64();
        // Well inside: both walk meanwhile, and the relay recomputes after
        // a step of its min_move; a unit of slack besides.
        let inside = self.enter_radius - 2.0 * self.speed * window as f32 - 1.0;
        if inside <= 0.0 {
            return;
        }
        let (now, then) = (self.position(me, t), self.position(me, t - window));
        for other in 0..ids.len() {
            let id = ids.get(other);
            if other == me || id == 0 {
                continue;
            }
            let stayed = distance(now, self.position(other, t)) <= inside
                && distance(then, self.position(other, t - window)) <= inside;
            if !stayed {
                continue;
            }
            checked.checks += 1;
            if heard(id).is_none_or(|last| last < t - window) {
                checked.unheard += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_is_the_same_for_every_bot_that_asks_and_moves_at_its_speed() {
        let walk = Walk::new(600.0, 3.0, 50.0);
        assert_eq!(walk.position(7, 12.5), walk.position(7, 12.5));
        let (a, b) = (walk.position(7, 10.0), walk.position(7, 11.0));
        let step = distance(a, b);
        assert!((2.5..=3.01).contains(&step), "{step}");
        assert_ne!(walk.position(7, 10.0), walk.position(8, 10.0));
    }
}
