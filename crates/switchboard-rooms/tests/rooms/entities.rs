//! Entities: spawned, updated by their owner or the host, synced at the
//! logic's rate, sent whole to late joiners, despawned with their owner.

use super::*;

#[test]
fn entities_spawn_update_only_by_owner_or_host_transfer_and_despawn() {
    let mut net = Rooms::new();
    let (ann, bob, cat, _) = net.three_in_a_room();
    // bob spawns a ship; everyone sees it with bob as owner.
    let ship = SpawnRequest {
        kind: "ship".into(),
        state: state_of(&(0i32, 0i32)),
    };
    net.accepted(bob, RoomAction::Spawn(ship));
    for p in [ann, bob, cat] {
        assert_eq!(net.room(p).unwrap().entities.len(), 1);
    }
    let ship = net.room(ann).unwrap().entities[0].clone();
    assert_eq!(ship.owner, net.id(bob));
    assert_eq!(ship.value::<(i32, i32)>().unwrap(), (0, 0));
    let update = |x: i32, y: i32| EntityUpdate {
        id: ship.id,
        state: state_of(&(x, y)),
    };
    // cat is neither owner nor host: refused, nothing changes.
    let not_yours = rejected("only the entity's owner or the host may do that");
    assert_eq!(net.ask(cat, RoomAction::Update(update(9, 9))), not_yours);
    assert_eq!(net.ask(cat, RoomAction::Despawn(ship.id)), not_yours);
    // The owner moves it; the host may too; the others see it at the next sync.
    net.accepted(bob, RoomAction::Update(update(1, 2)));
    net.advance(Duration::from_millis(50));
    assert_eq!(
        net.room(cat).unwrap().entities[0]
            .value::<(i32, i32)>()
            .unwrap(),
        (1, 2)
    );
    net.accepted(ann, RoomAction::Update(update(3, 4)));
    // bob hands it to cat, who may now move it, and bob no longer may.
    let cat_id = net.id(cat);
    net.accepted(
        bob,
        RoomAction::Transfer(Transfer {
            id: ship.id,
            owner: cat_id,
        }),
    );
    assert_eq!(net.room(cat).unwrap().entities[0].owner, cat_id);
    net.accepted(cat, RoomAction::Update(update(5, 6)));
    assert!(matches!(
        net.ask(bob, RoomAction::Update(update(7, 7))),
        RequestStatus::Rejected(_)
    ));
    net.accepted(cat, RoomAction::Despawn(ship.id));
    for p in [ann, bob, cat] {
        assert!(net.room(p).unwrap().entities.is_empty());
    }
}

/// Ann and bob in a room of four, ann's ball spawned in it, bob's events
/// read so far.
fn ball_in_a_room(net: &mut Rooms) -> (Player, Player, RoomId, EntityId) {
    let (ann, bob) = net.ann_and_bob();
    let room = net.room_of_two(ann, bob, 4);
    let spawn = SpawnRequest {
        kind: "ball".into(),
        state: state_of(&0u32),
    };
    net.accepted(ann, RoomAction::Spawn(spawn));
    let ball = net.room(bob).unwrap().entities[0].id;
    net.heard(bob);
    (ann, bob, room, ball)
}

#[test]
fn changed_only_updates_at_the_sync_rate_and_late_joiners_get_a_snapshot() {
    let mut net = Rooms::new();
    let (ann, bob, room, ball) = ball_in_a_room(&mut net);
    // 100 updates within one sync period, then one period: bob gets one
    // sync with the last state, not 100.
    for n in 1..=100u32 {
        let update = EntityUpdate {
            id: ball,
            state: state_of(&n),
        };
        net.accepted(ann, RoomAction::Update(update));
    }
    net.advance(Duration::from_millis(50));
    let syncs: Vec<Vec<EntityUpdate>> = net
        .heard(bob)
        .into_iter()
        .filter_map(|e| match e {
            RoomEvent::StateUpdate(sync) => Some(sync.updates),
            _ => None,
        })
        .collect();
    assert_eq!(syncs.len(), 1, "one sync carried 100 updates");
    assert_eq!(syncs[0].len(), 1, "the ball once");
    assert_eq!(syncs[0][0].value::<u32>().unwrap(), 100);
    // Nothing changes: nothing is sent.
    net.advance(Duration::from_millis(500));
    assert!(net.heard(bob).is_empty(), "no change, no update");
    // A late joiner gets the ball with its latest state.
    let cat = net.player("cat");
    net.accepted(cat, RoomAction::Join(room));
    let snapshot = &net.room(cat).unwrap().entities;
    assert_eq!(snapshot.len(), 1);
    assert_eq!(snapshot[0].value::<u32>().unwrap(), 100);
}

#[test]
fn entity_syncs_carry_the_server_s_time_for_interpolation() {
    let mut net = Rooms::new();
    let (ann, bob, _, ball) = ball_in_a_room(&mut net);
    let mut times = Vec::new();
    for n in 1..=5u32 {
        let update = EntityUpdate {
            id: ball,
            state: state_of(&n),
        };
        net.accepted(ann, RoomAction::Update(update));
        net.advance(Duration::from_millis(50));
        for event in net.heard(bob) {
            if let RoomEvent::StateUpdate(sync) = event {
                times.push(sync.server_time_ms);
            }
        }
    }
    assert_eq!(times.len(), 5, "{times:?}");
    let steps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(
        steps,
        [50, 50, 50, 50],
        "the sync rate, on the server's clock"
    );
}

#[test]
fn the_sync_rate_is_the_logic_s_own_not_the_manager_s_tick() {
    let config = ManagerRules {
        tick_interval: Duration::from_secs(1),
        ..ManagerRules::default()
    };
    let mut net = Rooms::new();
    net.net = Harness::new(config, RoomsLogic::new(), Instant::now());
    let (ann, bob) = net.ann_and_bob();
    net.room_of_two(ann, bob, 4);
    let spawn = SpawnRequest {
        kind: "ball".into(),
        state: state_of(&0u32),
    };
    net.accepted(ann, RoomAction::Spawn(spawn));
    let ball = net.room(bob).unwrap().entities[0].id;
    net.heard(bob);
    let mut syncs = 0;
    for n in 1..=10u32 {
        net.accepted(
            ann,
            RoomAction::Update(EntityUpdate {
                id: ball,
                state: state_of(&n),
            }),
        );
        net.advance(Duration::from_millis(50));
        syncs += net
            .heard(bob)
            .iter()
            .filter(|e| matches!(e, RoomEvent::StateUpdate(_)))
            .count();
    }
    assert_eq!(syncs, 10, "20 Hz, though the manager's own tick is 1 s");
}

#[test]
fn regression_a_leaver_s_entities_are_despawned_for_the_others() {
    let mut net = Rooms::new();
    let (ann, bob) = net.ann_and_bob();
    net.room_of_two(ann, bob, 4);
    for (who, kind) in [(bob, "ship"), (bob, "boat"), (ann, "fort")] {
        let spawn = SpawnRequest {
            kind: kind.into(),
            state: state_of(&0u32),
        };
        net.accepted(who, RoomAction::Spawn(spawn));
    }
    assert_eq!(net.room(ann).unwrap().entities.len(), 3);
    net.accepted(bob, RoomAction::Leave);
    let kinds: Vec<&str> = net
        .room(ann)
        .unwrap()
        .entities
        .iter()
        .map(|e| e.kind.as_str())
        .collect();
    assert_eq!(kinds, ["fort"], "bob's ship and boat went with bob");
    // A late joiner does not get them either.
    let cat = net.player("cat");
    let room = net.room(ann).unwrap().id;
    net.accepted(cat, RoomAction::Join(room));
    assert_eq!(net.room(cat).unwrap().entities.len(), 1);
}
