//! The world against a brute-force model: random players walking,
//! entering and leaving a small map, every view checked after each call.

use std::collections::{HashMap, HashSet};

use super::{InterestConfig, InterestConfigError, World};

/// A small, seeded generator: the same walk every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % u64::from(n)) as u32
    }

    fn unit(&mut self) -> f32 {
        self.below(1 << 24) as f32 / (1 << 24) as f32
    }
}

fn distance2(a: [f32; 3], b: [f32; 3]) -> f32 {
    (a[0] - b[0]).powi(2) + (a[2] - b[2]).powi(2)
}

/// With `min_move` 0 every call recomputes the mover's view: right after
/// it, everyone within the enter radius is seen, nobody past the leave
/// radius is, views are mutual, and each pair's band is its distance's.
#[test]
fn views_match_the_distances_through_a_random_walk_with_entries_and_leaves() {
    let config = InterestConfig {
        min_move: 0.0,
        ..InterestConfig::around(10.0, Some(13.0), None, [0, 2])
    };
    let mut world = World::new(config);
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut at: HashMap<u32, [f32; 3]> = HashMap::new();
    let side = 60.0;
    let (mut entered, mut left) = (0, 0);
    for step in 0..2_500 {
        let id = rng.below(120) + 1;
        if at.contains_key(&id) && rng.below(20) == 0 {
            let saw: HashSet<u32> = world.seen_by(id).collect();
            let watchers: HashSet<u32> = world.leave(id).into_iter().collect();
            at.remove(&id);
            assert_eq!(watchers, saw, "step {step}: those who saw {id} are told");
            for other in at.keys() {
                assert!(!world.seen_by(*other).any(|s| s == id), "step {step}");
            }
            world.check_layout();
            continue;
        }
        let position = match at.get(&id) {
            Some(p) => [
                (p[0] + rng.unit() * 8.0 - 4.0).clamp(-5.0, side),
                0.0,
                (p[2] + rng.unit() * 8.0 - 4.0).clamp(-5.0, side),
            ],
            None => [rng.unit() * side, 0.0, rng.unit() * side],
        };
        at.insert(id, position);
        let (changes, recipients) = world.moved(id, position);
        entered += changes.entered.len();
        left += changes.left.len();
        world.check_layout();
        let seen: HashSet<u32> = world.seen_by(id).collect();
        for (&other, &there) in &at {
            let d2 = distance2(position, there);
            if other == id {
                continue;
            }
            if d2 <= config.enter_radius.powi(2) {
                assert!(seen.contains(&other), "step {step}: {id} must see {other}");
            }
            if d2 > config.leave_radius.powi(2) {
                assert!(!seen.contains(&other), "step {step}: {id} sees {other}");
            }
            let mutual = world.seen_by(other).any(|s| s == id);
            assert_eq!(seen.contains(&other), mutual, "step {step}");
        }
        assert!(recipients.iter().all(|r| seen.contains(r)));
        for &(a, b) in &changes.entered {
            assert_eq!(a, id);
            assert!(seen.contains(&b));
        }
        for &(a, b) in &changes.left {
            assert_eq!(a, id);
            assert!(!seen.contains(&b));
        }
    }
    // The walk did exercise both edges of the view.
    assert!(
        entered > 300 && left > 300,
        "{entered} entered, {left} left"
    );
}

/// A neighbour in the outer band hears every fourth transform, one in
/// the middle band every second, a near one every one: none starves.
#[test]
fn rates_follow_the_bands_of_a_standing_crowd() {
    let config = InterestConfig::around(50.0, None, None, [0, 2]);
    let mut world = World::new(config);
    world.enter(1, [0.0; 3]);
    world.enter(2, [10.0, 0.0, 0.0]); // within full_rate_within (20)
    world.enter(3, [30.0, 0.0, 0.0]); // within half_rate_within (35)
    world.enter(4, [45.0, 0.0, 0.0]); // beyond: a quarter
    let mut heard: HashMap<u32, u32> = HashMap::new();
    for _ in 0..8 {
        for r in world.moved(1, [0.0; 3]).1 {
            *heard.entry(r).or_default() += 1;
        }
    }
    assert_eq!(heard.get(&2), Some(&8));
    assert_eq!(heard.get(&3), Some(&4));
    assert_eq!(heard.get(&4), Some(&2));
    world.check_layout();
}

#[test]
fn an_interest_config_that_makes_no_sense_says_which_rule_it_breaks() {
    let ok = InterestConfig::around(50.0, None, None, [0, 2]);
    assert_eq!(ok.check(), Ok(()));
    let with = |change: fn(&mut InterestConfig)| {
        let mut config = ok;
        change(&mut config);
        config.check()
    };
    assert_eq!(
        with(|c| c.enter_radius = f32::NAN),
        Err(InterestConfigError::Radii)
    );
    assert_eq!(
        with(|c| c.leave_radius = 10.0),
        Err(InterestConfigError::LeaveInsideEnter)
    );
    assert_eq!(
        with(|c| c.min_move = -1.0),
        Err(InterestConfigError::MinMove)
    );
    assert_eq!(with(|c| c.axes = [1, 1]), Err(InterestConfigError::Axes));
    assert_eq!(with(|c| c.axes = [0, 3]), Err(InterestConfigError::Axes));
}
