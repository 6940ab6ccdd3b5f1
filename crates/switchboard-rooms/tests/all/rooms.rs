//! The rooms' rules in memory (the harness: client cores and a manager core
//! running `RoomsLogic`, no socket, a clock the test moves), including
//! regression tests named after the defects of a known Python implementation
//! of the same feature set. `RoomClient` itself (its signals and RPC
//! handlers) is tested over loopback in `rooms_loopback.rs`.
//!
//! One binary: the lobby's rules here, `rooms/entities.rs` and
//! `rooms/limits.rs` beside them, sharing the helpers at the top.

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

#[path = "../rooms/entities.rs"]
mod entities;
#[path = "../rooms/limits.rs"]
mod limits;
