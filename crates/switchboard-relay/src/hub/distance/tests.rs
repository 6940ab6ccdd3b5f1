//! Interest by distance, in memory: who hears whom inside a zone, entries
//! and leaves, no flicker at the edge, no work standing still, rates by
//! distance band.

use super::super::*;

fn relay() -> Relay {
    Relay::new().with_interest(InterestConfig::default())
}

fn at(zone: &str, x: f32, z: f32) -> Transform {
    Transform {
        position: [x, 0.0, z],
        zone: zone.into(),
        ..Transform::default()
    }
}

fn player(relay: &mut Relay) -> u32 {
    relay.join("", None, Link::Native, false).0
}

/// Who got `from`'s transform in `out`.
fn heard(out: &[Outgoing], from: u32) -> Vec<u32> {
    out.iter()
        .filter(|(_, e)| matches!(e, RelayEvent::Transform { player_id, .. } if *player_id == from))
        .flat_map(|(to, _)| to.clone())
        .collect()
}

/// Who was told that `who` left their view.
fn told_left(out: &[Outgoing], who: u32) -> Vec<u32> {
    out.iter()
        .filter(|(_, e)| matches!(e, RelayEvent::Left { player_id } if *player_id == who))
        .flat_map(|(to, _)| to.clone())
        .collect()
}

#[test]
fn near_players_hear_each_other_and_far_ones_do_not() {
    let mut relay = relay();
    let (a, b, c) = (player(&mut relay), player(&mut relay), player(&mut relay));
    relay.transform(a, at("w", 0.0, 0.0), 1);
    relay.transform(c, at("w", 200.0, 0.0), 2);
    // B arrives 15 away from a: it is shown a, and a hears it.
    let out = relay.transform(b, at("w", 15.0, 0.0), 3);
    assert_eq!(heard(&out, a), [b], "b is shown where a stands");
    assert_eq!(heard(&out, b), [a]);
    // C, 200 away, hears nobody and nobody hears it.
    let out = relay.transform(c, at("w", 199.0, 0.0), 4);
    assert!(out.is_empty(), "{out:?}");
    let out = relay.transform(a, at("w", 0.0, 1.0), 5);
    assert_eq!(heard(&out, a), [b]);
}

#[test]
fn no_flicker_between_the_enter_and_leave_radii() {
    let mut relay = relay();
    let (a, b) = (player(&mut relay), player(&mut relay));
    relay.transform(a, at("w", 0.0, 0.0), 1);
    // 55 away: past the enter radius (50), not in view.
    let out = relay.transform(b, at("w", 55.0, 0.0), 2);
    assert!(heard(&out, a).is_empty() && heard(&out, b).is_empty());
    // 45: in view.
    let out = relay.transform(b, at("w", 45.0, 0.0), 3);
    assert_eq!((heard(&out, a), heard(&out, b)), (vec![b], vec![a]));
    // Back and forth between 50 and 60: stays in view, nobody told of a leave.
    for (i, x) in [55.0, 52.0, 58.0, 54.0, 59.0].into_iter().enumerate() {
        let out = relay.transform(b, at("w", x, 0.0), 10 + i as u64);
        assert!(told_left(&out, a).is_empty() && told_left(&out, b).is_empty());
    }
    // 65: out of view, both sides told.
    let out = relay.transform(b, at("w", 65.0, 0.0), 20);
    assert_eq!((told_left(&out, a), told_left(&out, b)), (vec![b], vec![a]));
    assert!(heard(&out, b).is_empty());
}

#[test]
fn standing_still_recomputes_nothing() {
    let mut relay = relay();
    let (a, b) = (player(&mut relay), player(&mut relay));
    relay.transform(a, at("w", 0.0, 0.0), 1);
    relay.transform(b, at("w", 10.0, 0.0), 2);
    let before = relay.view_recomputes();
    for t in 0..50 {
        // Turning on the spot, or a step under min_move (1).
        relay.transform(a, at("w", 0.0, 0.2), 100 + t * 50);
        relay.transform(b, at("w", 10.0, 0.0), 100 + t * 50);
    }
    assert_eq!(relay.view_recomputes(), before);
    relay.transform(a, at("w", 0.0, 1.5), 3000);
    assert_eq!(relay.view_recomputes(), before + 1, "a step past min_move");
}

#[test]
fn rates_fall_with_distance_and_nobody_starves() {
    let mut relay = relay();
    let a = player(&mut relay);
    let (near, mid, far) = (player(&mut relay), player(&mut relay), player(&mut relay));
    relay.transform(a, at("w", 0.0, 0.0), 1);
    relay.transform(near, at("w", 10.0, 0.0), 1);
    relay.transform(mid, at("w", 0.0, 30.0), 1);
    relay.transform(far, at("w", -45.0, 0.0), 1);
    let mut got = BTreeMap::<u32, u32>::new();
    for t in 0..100u64 {
        for to in heard(&relay.transform(a, at("w", 0.0, 0.0), 100 + t * 20), a) {
            *got.entry(to).or_default() += 1;
        }
    }
    assert_eq!(
        (got[&near], got[&mid], got[&far]),
        (100, 50, 25),
        "full rate within 20, half within 35, a quarter further"
    );
}

#[test]
fn zones_stay_the_coarse_filter() {
    let mut relay = relay();
    let (a, b) = (player(&mut relay), player(&mut relay));
    relay.transform(a, at("town", 0.0, 0.0), 1);
    let out = relay.transform(b, at("forest", 0.0, 0.0), 2);
    assert!(out.is_empty(), "{out:?}");
    // B walks into town next to a: it leaves nobody, a hears it.
    let out = relay.transform(b, at("town", 1.0, 0.0), 3);
    assert_eq!((heard(&out, a), heard(&out, b)), (vec![b], vec![a]));
    // And out again: a is told b left.
    let out = relay.transform(b, at("forest", 1.0, 0.0), 4);
    assert_eq!(told_left(&out, b), [a]);
}

#[test]
fn a_player_who_leaves_is_gone_for_those_who_saw_it_only() {
    let mut relay = relay();
    let (a, b, c) = (player(&mut relay), player(&mut relay), player(&mut relay));
    relay.transform(a, at("w", 0.0, 0.0), 1);
    relay.transform(b, at("w", 5.0, 0.0), 2);
    relay.transform(c, at("w", 500.0, 0.0), 3);
    let out = relay.leave(a);
    assert_eq!(told_left(&out, a), [b], "c never saw a");
    // B's next step is heard by nobody.
    assert!(relay.transform(b, at("w", 6.0, 0.0), 4).is_empty());
    // Everyone gone: the world goes, its count stays in the total.
    let before = relay.view_recomputes();
    assert!(before > 0);
    relay.leave(b);
    relay.leave(c);
    assert_eq!(relay.view_recomputes(), before);
    assert_eq!(relay.stats().view_recomputes, before);
}
