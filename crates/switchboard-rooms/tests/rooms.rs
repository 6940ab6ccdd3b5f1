//! The rooms' rules in memory (the harness: client cores and a manager core
//! running `RoomsLogic`, no socket, a clock the test moves), including
//! regression tests named after the defects of a known Python implementation
//! of the same feature set. `RoomClient` itself (its signals and RPC
//! handlers) is tested over loopback in `rooms_loopback.rs`.
//!
//! Longer than 500 lines on purpose: every rule of the rooms in one place, one test per
//! scenario sharing the helpers at the top; split, they would repeat them.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde::Serialize;
use switchboard::harness::{Harness, Player};
use switchboard::message::TypedMessage;
use switchboard::{
    ClientConfig, ClientEvent, ClientId, ManagerRules, ReconnectPolicy, RequestStatus,
};
use switchboard_rooms::protocol::{CustomRequest, Kick, RoomAction, RpcRequest, SpawnRequest};
use switchboard_rooms::{
    CreateRoom, EntityId, EntityUpdate, RoomEvent, RoomId, RoomState, RoomView, RoomsLogic,
    RpcTarget, StateSync, Transfer,
};

/// Rooms on an in-memory network; each player's room as it heard it.
struct Rooms {
    net: Harness<RoomsLogic>,
    views: HashMap<Player, RoomView>,
    heard: HashMap<Player, Vec<RoomEvent>>,
}

impl Rooms {
    fn new() -> Self {
        Self {
            net: Harness::new(ManagerRules::default(), RoomsLogic::new(), Instant::now()),
            views: HashMap::new(),
            heard: HashMap::new(),
        }
    }

    fn player(&mut self, name: &str) -> Player {
        let config = ClientConfig {
            reconnect: ReconnectPolicy {
                initial_delay: Duration::from_millis(50),
                ..Default::default()
            },
            ..ClientConfig::named(name)
        };
        let player = self.net.join(config);
        assert!(self.net.client(player).is_welcomed());
        self.views.insert(player, RoomView::default());
        self.absorb();
        player
    }

    fn id(&self, player: Player) -> ClientId {
        self.net.client(player).client_id().unwrap()
    }

    /// Sends a request and returns its verdict; everything it caused has
    /// been heard.
    fn ask(&mut self, who: Player, request: RoomAction) -> RequestStatus {
        let ticket = self.net.request(who, request).unwrap();
        let verdict = self.net.verdict(who, ticket);
        assert!(verdict.is_done(), "a verdict");
        self.absorb();
        verdict
    }

    #[track_caller]
    fn accepted(&mut self, who: Player, request: RoomAction) {
        assert_eq!(self.ask(who, request), RequestStatus::Accepted);
    }

    /// Moves the clock (the rooms' 20 Hz sync runs on the way).
    fn advance(&mut self, by: Duration) {
        self.net.advance(by);
        self.absorb();
    }

    /// Every player's events into its view and its log.
    fn absorb(&mut self) {
        let players: Vec<Player> = self.views.keys().copied().collect();
        for player in players {
            for event in self.net.events(player) {
                if let ClientEvent::Message(message) = event {
                    if let Some(event) = RoomEvent::decode(&message) {
                        self.views.get_mut(&player).unwrap().apply(&event);
                        self.heard.entry(player).or_default().push(event);
                    }
                }
            }
        }
    }

    fn room(&self, player: Player) -> Option<&RoomState> {
        self.views[&player].room()
    }

    /// The room events `player` heard since the last call.
    fn heard(&mut self, player: Player) -> Vec<RoomEvent> {
        self.heard.remove(&player).unwrap_or_default()
    }

    /// ann creates a room of `max`; bob joins it.
    fn room_of_two(&mut self, ann: Player, bob: Player, max: u8) -> RoomId {
        self.accepted(ann, RoomAction::Create(new_room("den", max)));
        let room = self.room(ann).unwrap().id;
        self.accepted(bob, RoomAction::Join(room));
        assert_eq!(self.room(ann).unwrap().players.len(), 2);
        assert!(self.room(bob).is_some());
        room
    }

    /// ann (the host), bob and cat in one room of four.
    fn three_in_a_room(&mut self) -> (Player, Player, Player, RoomId) {
        let (ann, bob) = self.ann_and_bob();
        let cat = self.player("cat");
        let room = self.room_of_two(ann, bob, 4);
        self.accepted(cat, RoomAction::Join(room));
        (ann, bob, cat, room)
    }

    fn ann_and_bob(&mut self) -> (Player, Player) {
        (self.player("ann"), self.player("bob"))
    }
}

fn new_room(name: &str, max: u8) -> CreateRoom {
    CreateRoom {
        name: name.into(),
        max_players: max,
        metadata: BTreeMap::new(),
        private: false,
    }
}

fn rejected(reason: &str) -> RequestStatus {
    RequestStatus::Rejected(reason.into())
}

fn rpc<T: Serialize>(target: RpcTarget, method: &str, args: &T) -> RpcRequest {
    RpcRequest {
        method: method.into(),
        target,
        args: switchboard::codec::encode_value(args).unwrap(),
    }
}

fn custom(channel: &str, data: &str) -> CustomRequest {
    CustomRequest {
        channel: channel.into(),
        data: switchboard::codec::encode_value(data).unwrap(),
    }
}

fn state_of<T: Serialize>(value: &T) -> Vec<u8> {
    switchboard::codec::encode_value(value).unwrap()
}

#[test]
fn joining_is_refused_for_full_locked_missing_and_duplicate_with_reasons() {
    let mut net = Rooms::new();
    let (ann, bob) = net.ann_and_bob();
    let cat = net.player("cat");
    let room = net.room_of_two(ann, bob, 2);
    assert_eq!(
        net.ask(cat, RoomAction::Join(room)),
        rejected("that room is full")
    );
    assert_eq!(
        net.ask(cat, RoomAction::Join(RoomId(999))),
        rejected("no such room")
    );
    net.accepted(cat, RoomAction::Create(new_room("cat's", 4)));
    let cats = net.room(cat).unwrap().id;
    assert_eq!(
        net.ask(bob, RoomAction::Join(cats)),
        rejected("you are in another room")
    );
    net.accepted(cat, RoomAction::Lock(true));
    net.accepted(bob, RoomAction::Leave);
    assert_eq!(
        net.ask(bob, RoomAction::Join(cats)),
        rejected("that room is locked")
    );
    // The list shows both public rooms with their counts.
    net.heard(bob);
    net.accepted(bob, RoomAction::ListRooms);
    let lists: Vec<Vec<(u8, bool)>> = net
        .heard(bob)
        .into_iter()
        .filter_map(|e| match e {
            RoomEvent::List(list) => Some(list.iter().map(|r| (r.players, r.locked)).collect()),
            _ => None,
        })
        .collect();
    assert_eq!(
        lists,
        [[(1, false), (1, true)]],
        "ann's room (bob left) and cat's locked room"
    );
}

#[test]
fn only_the_host_starts_and_only_when_everyone_is_ready() {
    let mut net = Rooms::new();
    let (ann, bob) = net.ann_and_bob();
    net.room_of_two(ann, bob, 4);
    net.accepted(ann, RoomAction::Ready(true));
    assert_eq!(
        net.ask(ann, RoomAction::Start),
        rejected("bob is not ready")
    );
    net.accepted(bob, RoomAction::Ready(true));
    assert_eq!(
        net.ask(bob, RoomAction::Start),
        rejected("only the host may do that")
    );
    net.heard(bob);
    net.accepted(ann, RoomAction::Start);
    assert_eq!(net.heard(bob), [RoomEvent::Started]);
    assert!(net.room(ann).unwrap().started && net.room(bob).unwrap().started);
}

#[test]
fn regression_custom_messages_from_one_client_reach_the_others() {
    let mut net = Rooms::new();
    let (ann, bob, cat, _) = net.three_in_a_room();
    for p in [ann, bob, cat] {
        net.heard(p);
    }
    net.accepted(bob, RoomAction::Custom(custom("emote", "waves")));
    let bob_id = net.id(bob);
    for p in [ann, cat] {
        let heard = net.heard(p);
        let [RoomEvent::Custom(m)] = &heard[..] else {
            panic!("{heard:?}")
        };
        assert_eq!((m.from, m.channel.as_str()), (bob_id, "emote"));
        assert_eq!(m.value::<String>().unwrap(), "waves");
    }
    assert!(net.heard(bob).is_empty(), "not echoed to the sender");
}

#[test]
fn regression_client_to_client_rpc_is_delivered_not_dropped() {
    let mut net = Rooms::new();
    let (ann, bob) = net.ann_and_bob();
    net.room_of_two(ann, bob, 4);
    net.heard(ann);
    net.heard(bob);
    let (ann_id, bob_id) = (net.id(ann), net.id(bob));
    net.accepted(
        ann,
        RoomAction::Rpc(rpc(RpcTarget::One(bob_id), "add", &1u32)),
    );
    net.accepted(bob, RoomAction::Rpc(rpc(RpcTarget::Host, "add", &2u32)));
    net.accepted(ann, RoomAction::Rpc(rpc(RpcTarget::All, "add", &3u32)));
    net.accepted(ann, RoomAction::Rpc(rpc(RpcTarget::Others, "add", &4u32)));
    let mut calls = Vec::new();
    for (who, p) in [("ann", ann), ("bob", bob)] {
        for event in net.heard(p) {
            if let RoomEvent::Rpc(call) = event {
                let n: u32 = switchboard::codec::decode_value(&call.args).unwrap();
                calls.push((who, call.from, call.method, n));
            }
        }
    }
    calls.sort_by_key(|c| (c.3, c.0));
    let add = || "add".to_string();
    assert_eq!(
        calls,
        [
            ("bob", ann_id, add(), 1),
            ("ann", bob_id, add(), 2),
            ("ann", ann_id, add(), 3),
            ("bob", ann_id, add(), 3),
            ("bob", ann_id, add(), 4),
        ]
    );
}

#[test]
fn regression_sender_id_and_ready_flag_cannot_be_spoofed() {
    let mut net = Rooms::new();
    let (ann, bob) = net.ann_and_bob();
    net.room_of_two(ann, bob, 4);
    net.heard(ann);
    let bob_id = net.id(bob);
    // There is no field in which bob could name a sender: the server stamps it.
    net.accepted(
        bob,
        RoomAction::Rpc(rpc(RpcTarget::Host, "hello", &"I am ann")),
    );
    let heard = net.heard(ann);
    let [RoomEvent::Rpc(call)] = &heard[..] else {
        panic!("{heard:?}")
    };
    assert_eq!(call.from, bob_id);
    // Ready marks the requester only.
    net.accepted(bob, RoomAction::Ready(true));
    let room = net.room(ann).unwrap();
    let ann_player = room.players.iter().find(|p| p.name == "ann").unwrap();
    let bob_player = room.players.iter().find(|p| p.id == bob_id).unwrap();
    assert!(bob_player.ready);
    assert!(!ann_player.ready, "bob's ready did not touch ann");
    assert!(ann_player.host && !bob_player.host, "nor claim the host");
}

#[test]
fn regression_players_cannot_join_after_the_game_started() {
    let mut net = Rooms::new();
    let (ann, bob) = net.ann_and_bob();
    let cat = net.player("cat");
    let room = net.room_of_two(ann, bob, 4);
    net.accepted(ann, RoomAction::Ready(true));
    net.accepted(bob, RoomAction::Ready(true));
    net.accepted(ann, RoomAction::Start);
    assert_eq!(
        net.ask(cat, RoomAction::Join(room)),
        rejected("the game in that room has started")
    );
}

#[test]
fn regression_a_kicked_client_receives_nothing_more() {
    let mut net = Rooms::new();
    let (ann, bob, cat, _) = net.three_in_a_room();
    for p in [ann, bob, cat] {
        net.heard(p);
    }
    let bob_id = net.id(bob);
    let kick = Kick {
        player: bob_id,
        reason: "griefing".into(),
    };
    net.accepted(ann, RoomAction::Kick(kick));
    assert_eq!(net.heard(bob), [RoomEvent::Kicked("griefing".into())]);
    assert!(net.room(bob).is_none());
    let cat_heard = net.heard(cat);
    assert!(
        matches!(&cat_heard[0], RoomEvent::PlayerLeft(left) if left.id == bob_id && left.reason == "kicked: griefing"),
        "{cat_heard:?}"
    );
    net.accepted(ann, RoomAction::Custom(custom("chat", "after the kick")));
    net.accepted(ann, RoomAction::Rpc(rpc(RpcTarget::All, "x", &0u8)));
    net.advance(Duration::from_millis(200));
    assert_eq!(
        net.heard(cat).len(),
        2,
        "cat heard the message and the call"
    );
    assert!(
        net.heard(bob).is_empty(),
        "the kicked client heard nothing more"
    );
}

#[test]
fn regression_reconnect_while_the_old_entry_exists_is_not_room_full() {
    let mut net = Rooms::new();
    let (ann, bob) = net.ann_and_bob();
    let room = net.room_of_two(ann, bob, 2);
    net.net.cut(bob);
    net.absorb();
    // ann sees bob's connection go, not bob leave.
    let away = net
        .room(ann)
        .unwrap()
        .players
        .iter()
        .find(|p| p.name == "bob")
        .unwrap()
        .clone();
    assert!(!away.connected);
    net.advance(Duration::from_millis(100));
    assert!(net.net.client(bob).is_welcomed());
    // The resumed session is still in the room, and told so.
    assert_eq!(net.room(bob).unwrap().players.len(), 2);
    // Joining again (what a naive client does after a reconnect) is no "room full".
    net.accepted(bob, RoomAction::Join(room));
    assert_eq!(net.room(ann).unwrap().players.len(), 2);
    assert!(net.room(ann).unwrap().players.iter().all(|p| p.connected));
}

#[test]
fn regression_the_goodbye_is_not_lost_on_disconnect_and_the_host_migrates() {
    let mut net = Rooms::new();
    let (ann, bob) = net.ann_and_bob();
    net.room_of_two(ann, bob, 4);
    net.heard(bob);
    let (ann_id, bob_id) = (net.id(ann), net.id(bob));
    // The host quits the program: its close is its goodbye.
    net.net.close(ann, "quit");
    net.absorb();
    let heard = net.heard(bob);
    assert!(heard
        .iter()
        .any(|e| matches!(e, RoomEvent::PlayerLeft(left) if left.id == ann_id)));
    assert!(
        heard.contains(&RoomEvent::HostChanged(bob_id)),
        "the host moved to the remaining player"
    );
    assert!(net.room(bob).unwrap().players[0].host);
}

#[test]
fn a_lost_connection_leaves_the_room_only_when_the_grace_period_ends() {
    let mut config = ManagerRules::default();
    config.sessions.grace_period = Duration::from_secs(20);
    let mut net = Rooms::new();
    net.net = Harness::new(config, RoomsLogic::new(), Instant::now());
    let (ann, bob) = net.ann_and_bob();
    net.room_of_two(ann, bob, 4);
    net.heard(ann);
    let bob_id = net.id(bob);
    net.net.set_reachable(bob, false);
    net.net.cut(bob);
    net.advance(Duration::from_secs(19));
    assert_eq!(
        net.room(ann).unwrap().players.len(),
        2,
        "a seat kept within the grace"
    );
    net.advance(Duration::from_secs(2));
    assert_eq!(net.room(ann).unwrap().players.len(), 1);
    assert!(net
        .heard(ann)
        .iter()
        .any(|e| matches!(e, RoomEvent::PlayerLeft(left) if left.id == bob_id && left.reason == "disconnected")));
}

#[test]
fn late_joiners_receive_the_full_room_state() {
    let mut net = Rooms::new();
    let (ann, bob) = net.ann_and_bob();
    let cat = net.player("cat");
    let room = net.room_of_two(ann, bob, 4);
    net.accepted(bob, RoomAction::Ready(true));
    net.accepted(cat, RoomAction::Join(room));
    let names: Vec<(String, bool, bool)> = net
        .room(cat)
        .unwrap()
        .players
        .iter()
        .map(|p| (p.name.clone(), p.host, p.ready))
        .collect();
    assert_eq!(
        names,
        [
            ("ann".to_string(), true, false),
            ("bob".to_string(), false, true),
            ("cat".to_string(), false, false)
        ]
    );
}

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
