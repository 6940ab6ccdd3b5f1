//! Names and quotas: what one player or one room may cost the server.

use super::*;

#[test]
fn room_names_follow_the_one_name_rule_trimmed_and_without_control_characters() {
    let mut net = Rooms::new();
    let ann = net.player("ann");
    let bad = net.ask(ann, RoomAction::Create(new_room("bell\u{7}", 4)));
    assert!(
        matches!(&bad, RequestStatus::Rejected(why) if why.starts_with("room name:")),
        "{bad:?}"
    );
    net.accepted(ann, RoomAction::Create(new_room("  den  ", 4)));
    assert_eq!(net.room(ann).unwrap().name, "den");
}

#[test]
fn quotas_per_server_and_per_player_hold() {
    let limits = switchboard_rooms::RoomLimits {
        max_rooms: 1,
        max_entities_per_player: 3,
        ..Default::default()
    };
    let mut net = Rooms::new();
    net.net = Harness::new(
        ManagerRules::default(),
        RoomsLogic::with_limits(limits),
        Instant::now(),
    );
    let (ann, bob) = net.ann_and_bob();
    net.room_of_two(ann, bob, 4);
    let cat = net.player("cat");
    assert_eq!(
        net.ask(cat, RoomAction::Create(new_room("second", 4))),
        rejected("the server has no room for more rooms")
    );
    let spawn = || SpawnRequest {
        kind: "unit".into(),
        state: state_of(&0u32),
    };
    for _ in 0..3 {
        net.accepted(ann, RoomAction::Spawn(spawn()));
    }
    assert_eq!(
        net.ask(ann, RoomAction::Spawn(spawn())),
        rejected("you own 3 entities, the most a player may")
    );
    net.accepted(bob, RoomAction::Spawn(spawn()));
    assert_eq!(net.room(bob).unwrap().entities.len(), 4);
}

/// A room network without the manager's per-client rates, for tests that
/// build big rooms quickly.
fn unthrottled(limits: switchboard_rooms::RoomLimits) -> Rooms {
    let unlimited = switchboard::session::RateLimit {
        per_second: 1e9,
        burst: 1e9,
    };
    let config = ManagerRules {
        message_rate: unlimited,
        byte_rate: unlimited,
        ..ManagerRules::default()
    };
    let mut net = Rooms::new();
    net.net = Harness::new(config, RoomsLogic::with_limits(limits), Instant::now());
    net
}

/// The bytes `content` takes in a message of the rooms channel.
fn encoded_len(message: RoomAction) -> usize {
    message.to_message().unwrap().content_bytes().len()
}

#[test]
fn a_late_joiner_to_a_big_room_gets_every_entity_in_pages_and_syncs_come_in_pages() {
    // 200 entities of 16,000 bytes: 3.2 MB, three times a frame's limit.
    let mut net = unthrottled(Default::default());
    let (ann, bob) = net.ann_and_bob();
    net.accepted(ann, RoomAction::Create(new_room("big", 4)));
    let room = net.room(ann).unwrap().id;
    for i in 0..200u32 {
        let spawn = SpawnRequest {
            kind: "block".into(),
            state: vec![i as u8; 16_000],
        };
        net.accepted(ann, RoomAction::Spawn(spawn));
    }
    net.accepted(bob, RoomAction::Join(room));
    let heard = net.heard(bob);
    let RoomEvent::State(state) = &heard[0] else {
        panic!("the state first: {:?}", heard[0]);
    };
    assert!(state.more_entities > 0);
    assert_eq!(state.entities.len() + state.more_entities as usize, 200);
    assert!(encoded_len(RoomAction::State(state.clone())) <= switchboard_rooms::PAGE_BYTES + 1024);
    let spawned = heard[1..]
        .iter()
        .filter(|e| matches!(e, RoomEvent::Spawned(_)))
        .count();
    assert_eq!(spawned, state.more_entities as usize);
    // The joiner's view is whole, every state intact.
    let entities = &net.room(bob).unwrap().entities;
    assert_eq!(entities.len(), 200);
    assert!(entities
        .iter()
        .all(|e| e.state == vec![(e.id.0 - 1) as u8; 16_000]));
    // Everything changes at once: the sync comes in pages too.
    for id in 1..=200u32 {
        let update = EntityUpdate {
            id: EntityId(id),
            state: vec![255; 16_000],
        };
        net.accepted(ann, RoomAction::Update(update));
    }
    net.heard(bob);
    net.advance(Duration::from_millis(100));
    let pages: Vec<StateSync> = net
        .heard(bob)
        .into_iter()
        .filter_map(|e| match e {
            RoomEvent::StateUpdate(page) => Some(page),
            _ => None,
        })
        .collect();
    assert!(pages.len() > 1, "{} pages", pages.len());
    assert!(pages.iter().all(|page| {
        encoded_len(RoomAction::StateUpdate(page.clone())) <= switchboard_rooms::PAGE_BYTES + 1024
    }));
    assert_eq!(pages.iter().map(|p| p.updates.len()).sum::<usize>(), 200);
    assert!(
        pages
            .iter()
            .all(|p| p.server_time_ms == pages[0].server_time_ms),
        "one sync's pages share its time"
    );
    assert!(net
        .room(bob)
        .unwrap()
        .entities
        .iter()
        .all(|e| e.state == vec![255; 16_000]));
}

#[test]
fn room_state_flood_is_capped_by_the_room_s_bytes() {
    let limits = switchboard_rooms::RoomLimits {
        max_room_state: 100,
        ..Default::default()
    };
    let mut net = unthrottled(limits);
    let (ann, bob) = net.ann_and_bob();
    net.room_of_two(ann, bob, 4);
    let spawn = |len| SpawnRequest {
        kind: "unit".into(),
        state: vec![1; len],
    };
    net.accepted(ann, RoomAction::Spawn(spawn(60)));
    let full = rejected("the room's entities hold at most 100 bytes of state");
    assert_eq!(net.ask(bob, RoomAction::Spawn(spawn(41))), full);
    net.accepted(bob, RoomAction::Spawn(spawn(40)));
    // Growing a state past it is refused; shrinking one makes room.
    let grow = EntityUpdate {
        id: EntityId(1),
        state: vec![2; 61],
    };
    assert_eq!(net.ask(ann, RoomAction::Update(grow)), full);
    let shrink = EntityUpdate {
        id: EntityId(1),
        state: vec![2; 10],
    };
    net.accepted(ann, RoomAction::Update(shrink));
    net.accepted(bob, RoomAction::Spawn(spawn(50)));
    // A despawn gives its bytes back.
    net.accepted(bob, RoomAction::Despawn(EntityId(3)));
    net.accepted(ann, RoomAction::Spawn(spawn(50)));
}

#[test]
fn rpc_flood_is_capped_per_player_per_second_and_others_still_get_through() {
    let mut net = Rooms::new();
    let (ann, bob) = net.ann_and_bob();
    net.room_of_two(ann, bob, 4);
    let call = rpc(RpcTarget::Others, "boom", &1u32);
    for _ in 0..15 {
        net.accepted(ann, RoomAction::Rpc(call.clone()));
        net.accepted(ann, RoomAction::Custom(custom("fx", "boom")));
    }
    // 30 in the second (RPCs and custom messages together): refused.
    let capped = rejected("at most 30 RPCs and custom messages a second");
    assert_eq!(net.ask(ann, RoomAction::Rpc(call.clone())), capped);
    assert_eq!(
        net.ask(ann, RoomAction::Custom(custom("fx", "boom"))),
        capped
    );
    let calls = net
        .heard(bob)
        .iter()
        .filter(|e| matches!(e, RoomEvent::Rpc(_) | RoomEvent::Custom(_)))
        .count();
    assert_eq!(calls, 30);
    // The room is not locked out: bob still calls.
    net.accepted(bob, RoomAction::Rpc(rpc(RpcTarget::Host, "hi", &())));
    // A second later, ann may again.
    net.advance(Duration::from_secs(1));
    net.accepted(ann, RoomAction::Rpc(call.clone()));
}
