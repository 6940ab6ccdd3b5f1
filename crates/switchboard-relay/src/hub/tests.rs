//! Unit tests of the hub: zones, rates, ids.

use super::*;

fn at(zone: &str, x: f32) -> Transform {
    Transform {
        position: [x, 0.0, 0.0],
        zone: zone.into(),
        ..Transform::default()
    }
}

#[test]
fn transforms_are_stamped_and_reach_only_the_same_zone() {
    let mut relay = Relay::new();
    let (a, _) = relay.join("a", None, Link::Native, false);
    let (b, _) = relay.join("b", None, Link::Json, false);
    let (c, _) = relay.join("c", None, Link::Native, true);
    relay.transform(b, at("town", 0.0), 1);
    relay.transform(c, at("forest", 0.0), 1);
    relay.transform(a, at("town", 4.0), 41);
    // Moving within the zone: only the other player in town hears it.
    let out = relay.transform(a, at("town", 5.0), 42);
    assert_eq!(out.len(), 1);
    let (to, event) = &out[0];
    assert_eq!(to, &vec![b], "only the other player in town");
    match event {
        RelayEvent::Transform {
            player_id,
            server_time_ms,
            transform,
        } => {
            assert_eq!(
                (*player_id, *server_time_ms, transform.position[0]),
                (a, 42, 5.0)
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn leaving_and_changing_zone_are_announced_to_those_who_could_see() {
    let mut relay = Relay::new();
    let (a, _) = relay.join("a", None, Link::Native, false);
    let (b, _) = relay.join("b", None, Link::Native, false);
    let (c, _) = relay.join("c", None, Link::Native, false);
    relay.transform(a, at("town", 0.0), 0);
    relay.transform(b, at("town", 0.0), 0);
    relay.transform(c, at("forest", 0.0), 0);
    let out = relay.transform(a, at("forest", 0.0), 0);
    assert!(
        out.contains(&(vec![b], RelayEvent::Left { player_id: a })),
        "town hears a left"
    );
    assert!(
        out.iter().any(|(to, e)| to == &vec![a]
            && matches!(e, RelayEvent::Transform { player_id, .. } if *player_id == c)),
        "a is shown where c stands in the forest"
    );
    assert!(out
        .iter()
        .any(|(to, e)| to == &vec![c] && matches!(e, RelayEvent::Transform { .. })));
    let out = relay.leave(c);
    assert_eq!(out, vec![(vec![a], RelayEvent::Left { player_id: c })]);
    assert_eq!(relay.stats().players, 2);
}

#[test]
fn out_of_limits_transforms_are_refused() {
    let mut relay = Relay::new();
    let (a, _) = relay.join("a", None, Link::Native, false);
    let mut bad = at("town", f32::NAN);
    assert!(relay.transform(a, bad.clone(), 0).is_empty());
    bad.position[0] = 0.0;
    bad.zone = "z".repeat(100);
    assert!(relay.transform(a, bad, 0).is_empty());
    assert_eq!(relay.stats().refused, 2);
}

#[test]
fn zone_leak_one_transform_per_fresh_zone_keeps_only_occupied_zones() {
    let mut relay = Relay::new();
    let (a, _) = relay.join("a", None, Link::Native, false);
    let (b, _) = relay.join("b", None, Link::Json, false);
    relay.transform(b, at("town", 0.0), 0);
    // 300,000 transforms, each to a zone never seen before, at 50 Hz.
    for i in 0..300_000u64 {
        relay.transform(a, at(&format!("zone-{i}"), 0.0), i * 20);
    }
    assert_eq!(
        relay.zone_count(),
        2,
        "a's current zone and b's town, nothing else"
    );
    assert_eq!(relay.stats().refused, 0);
    relay.leave(a);
    relay.leave(b);
    assert_eq!(relay.zone_count(), 0);
}

#[test]
fn transform_flood_is_rate_limited_then_the_player_is_marked_abusive() {
    let mut relay = Relay::new();
    let (a, _) = relay.join("a", None, Link::Native, false);
    let (b, _) = relay.join("b", None, Link::Native, false);
    relay.transform(b, at("town", 0.0), 0);
    let mut heard = 0;
    for _ in 0..1_000 {
        heard += relay.transform(a, at("town", 1.0), 5).len();
    }
    // The burst of 120 (b's entry snapshot aside) reaches b; the rest
    // is dropped, each drop a strike; past 100 strikes a is abusive, once.
    assert_eq!(heard, 120 + 1);
    assert_eq!(relay.stats().refused, 880);
    let abusive = relay.take_abusive();
    assert_eq!(abusive.len(), 8, "once per 101 strikes");
    assert!(abusive.iter().all(|(id, _)| *id == a));
    assert!(relay.take_abusive().is_empty());
    // The budget refills with time: 60 a second.
    assert_eq!(relay.transform(a, at("town", 2.0), 1_005).len(), 1);
}

#[test]
fn player_ids_wrap_without_landing_on_live_players() {
    let mut relay = Relay::new();
    let (first, _) = relay.join("first", None, Link::Native, false);
    assert_eq!(first, 1);
    relay.next_id = u32::MAX - 1;
    let (a, _) = relay.join("a", None, Link::Native, false);
    let (b, _) = relay.join("b", None, Link::Native, false);
    assert_eq!((a, b), (u32::MAX, 2), "past u32::MAX: not 0, not 1 (live)");
}
