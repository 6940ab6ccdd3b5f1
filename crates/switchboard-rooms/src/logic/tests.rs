//! Unit tests of the rooms' logic.

use super::*;

fn apply(logic: &mut RoomsLogic, client: ClientId, message: RoomAction) -> Outbox {
    let request = Request {
        client,
        id: 1,
        message,
    };
    let command = logic.validate(&request).unwrap();
    let mut out = Outbox::default();
    logic.apply(client, command, &mut out);
    out
}

#[test]
fn measured_latency_reaches_the_room_when_it_changes() {
    let mut logic = RoomsLogic::new();
    let (ann, bob) = (ClientId::random(), ClientId::random());
    logic.on_join(ann, "ann", &mut Outbox::default());
    logic.on_join(bob, "bob", &mut Outbox::default());
    let create = CreateRoom {
        name: "r".into(),
        max_players: 4,
        metadata: BTreeMap::new(),
        private: false,
    };
    apply(&mut logic, ann, RoomAction::Create(create));
    apply(&mut logic, bob, RoomAction::Join(RoomId(1)));

    let mut out = Outbox::default();
    logic.on_latency(&[(bob, std::time::Duration::from_millis(42))], &mut out);
    assert_eq!(out.updates().len(), 1);
    let (audience, message) = &out.updates()[0];
    assert_eq!(*audience, Audience::Only(vec![ann, bob]));
    let player: RoomPlayer = message.content().unwrap();
    assert_eq!((player.id, player.latency_ms), (bob, 42));
    // A change under 5 ms is not worth a message.
    let mut out = Outbox::default();
    logic.on_latency(&[(bob, std::time::Duration::from_millis(44))], &mut out);
    assert!(out.updates().is_empty());
    // And the room's state carries it for late joiners.
    let mut out = Outbox::default();
    logic.send_state(&mut out, bob, logic.rooms.get(&RoomId(1)).unwrap());
    let state: RoomState = out.updates()[0].1.content().unwrap();
    assert_eq!(
        state
            .players
            .iter()
            .find(|p| p.id == bob)
            .unwrap()
            .latency_ms,
        42
    );
}
