//! Rooms, lobby and RPC over loopback, including regression tests named after
//! the defects of a known Python implementation of the same feature set.

#[path = "../../switchboard/tests/common/mod.rs"]
mod common;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::{Proxy, WAIT};
use switchboard::{
    BindScope, ClientConfig, ClientId, ManagerConfig, ManagerHandle, ReconnectPolicy,
    RequestStatus, ServerManager,
};
use switchboard_rooms::{
    CreateRoom, CustomMessage, PlayerLeft, RoomClient, RoomId, RoomsLogic, RpcError, RpcTarget,
};

fn server() -> ManagerHandle {
    ServerManager::spawn(
        BindScope::Loopback,
        0,
        ManagerConfig::default(),
        RoomsLogic::new(),
    )
    .unwrap()
}

fn player(addr: impl ToString, name: &str) -> RoomClient {
    let config = ClientConfig {
        reconnect: ReconnectPolicy {
            initial_delay: Duration::from_millis(50),
            ..Default::default()
        },
        ..ClientConfig::named(name)
    };
    let mut client = RoomClient::connect(addr, config);
    pump(&mut [&mut client], |c| c[0].client().is_welcomed());
    client
}

/// Two players, "ann" and "bob", joined to `server`.
fn ann_and_bob(server: &ManagerHandle) -> (RoomClient, RoomClient) {
    (
        player(server.local_addr(), "ann"),
        player(server.local_addr(), "bob"),
    )
}

fn pump(clients: &mut [&mut RoomClient], mut done: impl FnMut(&[&mut RoomClient]) -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done(clients) {
        assert!(Instant::now() < deadline, "condition not reached in time");
        for c in clients.iter_mut() {
            c.poll();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sends with `send` and polls every client until the verdict.
fn verdict(
    clients: &mut [&mut RoomClient],
    who: usize,
    send: impl FnOnce(&mut RoomClient) -> switchboard::RequestTicket,
) -> RequestStatus {
    let ticket = send(clients[who]);
    pump(clients, |_| ticket.is_done());
    ticket.status()
}

/// Like [`verdict`], and the verdict must be `Accepted`.
#[track_caller]
fn accepted(
    clients: &mut [&mut RoomClient],
    who: usize,
    send: impl FnOnce(&mut RoomClient) -> switchboard::RequestTicket,
) {
    assert_eq!(verdict(clients, who, send), RequestStatus::Accepted);
}

fn new_room(name: &str, max: u8) -> CreateRoom {
    CreateRoom {
        name: name.into(),
        max_players: max,
        metadata: BTreeMap::new(),
        private: false,
    }
}

fn id(c: &RoomClient) -> ClientId {
    c.client().client_id().unwrap()
}

/// ann creates a room of `max`; bob joins it. Returns the room.
fn room_of_two(ann: &mut RoomClient, bob: &mut RoomClient, max: u8) -> RoomId {
    accepted(&mut [ann, bob], 0, |c| {
        c.create(&new_room("den", max)).unwrap()
    });
    let room = ann.room().unwrap().id;
    accepted(&mut [ann, bob], 1, |c| c.join(room).unwrap());
    pump(&mut [ann, bob], |c| {
        c[0].room().is_some_and(|r| r.players.len() == 2) && c[1].room().is_some()
    });
    room
}

#[test]
fn joining_is_refused_for_full_locked_missing_and_duplicate_with_reasons() {
    let server = server();
    let (mut ann, mut bob, mut cat) = (
        player(server.local_addr(), "ann"),
        player(server.local_addr(), "bob"),
        player(server.local_addr(), "cat"),
    );
    let room = room_of_two(&mut ann, &mut bob, 2);
    let clients = &mut [&mut ann, &mut bob, &mut cat];
    assert_eq!(
        verdict(clients, 2, |c| c.join(room).unwrap()),
        RequestStatus::Rejected("that room is full".into())
    );
    assert_eq!(
        verdict(clients, 2, |c| c.join(RoomId(999)).unwrap()),
        RequestStatus::Rejected("no such room".into())
    );
    accepted(clients, 2, |c| c.create(&new_room("cat's", 4)).unwrap());
    let cats = clients[2].room().unwrap().id;
    assert_eq!(
        verdict(clients, 1, |c| c.join(cats).unwrap()),
        RequestStatus::Rejected("you are in another room".into())
    );
    accepted(clients, 2, |c| c.lock(true).unwrap());
    accepted(clients, 1, |c| c.leave().unwrap());
    assert_eq!(
        verdict(clients, 1, |c| c.join(cats).unwrap()),
        RequestStatus::Rejected("that room is locked".into())
    );
    // The rejected join was announced through the signal too.
    let rejected = Rc::new(RefCell::new(Vec::new()));
    let r = rejected.clone();
    clients[1]
        .signals()
        .join_rejected
        .connect(move |why| r.borrow_mut().push(why.clone()));
    clients[1].join(RoomId(42)).unwrap();
    pump(clients, |_| !rejected.borrow().is_empty());
    assert_eq!(rejected.borrow()[0], "no such room");
    // The list shows both public rooms with their counts.
    let listed = Rc::new(RefCell::new(None));
    let l = listed.clone();
    clients[1]
        .signals()
        .rooms_listed
        .connect(move |list| *l.borrow_mut() = Some(list.clone()));
    clients[1].list().unwrap();
    pump(clients, |_| listed.borrow().is_some());
    let counts: Vec<(u8, bool)> = listed
        .borrow()
        .as_ref()
        .unwrap()
        .iter()
        .map(|r| (r.players, r.locked))
        .collect();
    assert_eq!(
        counts,
        [(1, false), (1, true)],
        "ann's room (bob left) and cat's locked room"
    );
}

#[test]
fn only_the_host_starts_and_only_when_everyone_is_ready() {
    let server = server();
    let (mut ann, mut bob) = ann_and_bob(&server);
    room_of_two(&mut ann, &mut bob, 4);
    let clients = &mut [&mut ann, &mut bob];
    accepted(clients, 0, |c| c.set_ready(true).unwrap());
    assert_eq!(
        verdict(clients, 0, |c| c.start().unwrap()),
        RequestStatus::Rejected("bob is not ready".into())
    );
    accepted(clients, 1, |c| c.set_ready(true).unwrap());
    assert_eq!(
        verdict(clients, 1, |c| c.start().unwrap()),
        RequestStatus::Rejected("only the host may do that".into())
    );
    let started = Rc::new(RefCell::new(0));
    let s = started.clone();
    clients[1]
        .signals()
        .game_started
        .connect(move |_| *s.borrow_mut() += 1);
    accepted(clients, 0, |c| c.start().unwrap());
    pump(clients, |_| *started.borrow() == 1);
    assert!(clients[0].room().unwrap().started && clients[1].room().unwrap().started);
}

#[test]
fn regression_custom_messages_from_one_client_reach_the_others() {
    let server = server();
    let (mut ann, mut bob) = ann_and_bob(&server);
    let mut cat = player(server.local_addr(), "cat");
    let room = room_of_two(&mut ann, &mut bob, 4);
    let clients = &mut [&mut ann, &mut bob, &mut cat];
    accepted(clients, 2, |c| c.join(room).unwrap());
    let heard: Vec<Rc<RefCell<Vec<CustomMessage>>>> = (0..3).map(|_| Rc::default()).collect();
    for (c, h) in clients.iter().zip(&heard) {
        let h = h.clone();
        c.signals()
            .custom
            .connect(move |m| h.borrow_mut().push(m.clone()));
    }
    accepted(clients, 1, |c| c.send_custom("emote", "waves").unwrap());
    pump(clients, |_| {
        heard[0].borrow().len() == 1 && heard[2].borrow().len() == 1
    });
    let bob_id = id(clients[1]);
    for h in [&heard[0], &heard[2]] {
        let m = &h.borrow()[0];
        assert_eq!((m.from, m.channel.as_str()), (bob_id, "emote"));
    }
    assert!(heard[1].borrow().is_empty(), "not echoed to the sender");
}

#[test]
fn regression_client_to_client_rpc_is_delivered_not_dropped() {
    let server = server();
    let (mut ann, mut bob) = ann_and_bob(&server);
    room_of_two(&mut ann, &mut bob, 4);
    let got: Rc<RefCell<Vec<(String, ClientId, u32)>>> = Rc::default();
    for (who, c) in [("ann", &ann), ("bob", &bob)] {
        let g = got.clone();
        c.register_rpc("add", move |from, n: u32| {
            g.borrow_mut().push((who.to_string(), from, n))
        });
    }
    let errors: Rc<RefCell<Vec<RpcError>>> = Rc::default();
    let e = errors.clone();
    bob.signals()
        .rpc_error
        .connect(move |err| e.borrow_mut().push(err.clone()));
    let (ann_id, bob_id) = (id(&ann), id(&bob));
    let clients = &mut [&mut ann, &mut bob];
    accepted(clients, 0, |c| {
        c.call(RpcTarget::One(bob_id), "add", &1u32).unwrap()
    });
    accepted(clients, 1, |c| {
        c.call(RpcTarget::Host, "add", &2u32).unwrap()
    });
    accepted(clients, 0, |c| {
        c.call(RpcTarget::All, "add", &3u32).unwrap()
    });
    accepted(clients, 0, |c| {
        c.call(RpcTarget::Others, "nope", &4u32).unwrap()
    });
    pump(clients, |_| {
        got.borrow().len() == 4 && errors.borrow().len() == 1
    });
    let mut calls = got.borrow().clone();
    calls.sort_by_key(|c| c.2);
    assert_eq!(
        calls,
        [
            ("bob".to_string(), ann_id, 1),
            ("ann".to_string(), bob_id, 2),
            ("ann".to_string(), ann_id, 3),
            ("bob".to_string(), ann_id, 3),
        ]
    );
    assert_eq!(
        errors.borrow()[0].method,
        "nope",
        "an unknown method is a typed error event"
    );
}

#[test]
fn regression_sender_id_and_ready_flag_cannot_be_spoofed() {
    let server = server();
    let (mut ann, mut bob) = ann_and_bob(&server);
    room_of_two(&mut ann, &mut bob, 4);
    let seen: Rc<RefCell<Vec<ClientId>>> = Rc::default();
    let s = seen.clone();
    ann.register_rpc("hello", move |from, _: String| s.borrow_mut().push(from));
    let bob_id = id(&bob);
    let clients = &mut [&mut ann, &mut bob];
    // There is no field in which bob could name a sender: the server stamps it.
    accepted(clients, 1, |c| {
        c.call(RpcTarget::Host, "hello", "I am ann").unwrap()
    });
    pump(clients, |_| !seen.borrow().is_empty());
    assert_eq!(seen.borrow()[0], bob_id);
    // Ready marks the requester only.
    accepted(clients, 1, |c| c.set_ready(true).unwrap());
    pump(clients, |c| {
        c[0].room()
            .unwrap()
            .players
            .iter()
            .any(|p| p.id == bob_id && p.ready)
    });
    let room = clients[0].room().unwrap();
    let ann_player = room.players.iter().find(|p| p.name == "ann").unwrap();
    assert!(!ann_player.ready, "bob's ready did not touch ann");
    assert!(
        ann_player.host && !room.players.iter().find(|p| p.id == bob_id).unwrap().host,
        "nor claim the host"
    );
}

#[test]
fn regression_players_cannot_join_after_the_game_started() {
    let server = server();
    let (mut ann, mut bob) = ann_and_bob(&server);
    let mut cat = player(server.local_addr(), "cat");
    let room = room_of_two(&mut ann, &mut bob, 4);
    let clients = &mut [&mut ann, &mut bob, &mut cat];
    accepted(clients, 0, |c| c.set_ready(true).unwrap());
    accepted(clients, 1, |c| c.set_ready(true).unwrap());
    accepted(clients, 0, |c| c.start().unwrap());
    assert_eq!(
        verdict(clients, 2, |c| c.join(room).unwrap()),
        RequestStatus::Rejected("the game in that room has started".into())
    );
}

#[test]
fn regression_a_kicked_client_receives_nothing_more() {
    let server = server();
    let (mut ann, mut bob) = ann_and_bob(&server);
    let mut cat = player(server.local_addr(), "cat");
    let room = room_of_two(&mut ann, &mut bob, 4);
    let bob_id = id(&bob);
    let clients = &mut [&mut ann, &mut bob, &mut cat];
    accepted(clients, 2, |c| c.join(room).unwrap());
    let kicked = Rc::new(RefCell::new(None));
    let k = kicked.clone();
    clients[1]
        .signals()
        .kicked
        .connect(move |why| *k.borrow_mut() = Some(why.clone()));
    let bob_heard: Rc<RefCell<usize>> = Rc::default();
    let b = bob_heard.clone();
    clients[1]
        .signals()
        .custom
        .connect(move |_| *b.borrow_mut() += 1);
    let cat_heard: Rc<RefCell<usize>> = Rc::default();
    let c = cat_heard.clone();
    clients[2]
        .signals()
        .custom
        .connect(move |_| *c.borrow_mut() += 1);
    let left: Rc<RefCell<Vec<PlayerLeft>>> = Rc::default();
    let l = left.clone();
    clients[2]
        .signals()
        .player_left
        .connect(move |p| l.borrow_mut().push(p.clone()));

    accepted(clients, 0, |c| c.kick(bob_id, "griefing").unwrap());
    pump(clients, |_| {
        kicked.borrow().is_some() && !left.borrow().is_empty()
    });
    assert_eq!(kicked.borrow().as_deref(), Some("griefing"));
    assert_eq!(left.borrow()[0].reason, "kicked: griefing");
    assert!(clients[1].room().is_none());
    accepted(clients, 0, |c| {
        c.send_custom("chat", "after the kick").unwrap()
    });
    accepted(clients, 0, |c| c.call(RpcTarget::All, "x", &0u8).unwrap());
    pump(clients, |_| *cat_heard.borrow() == 1);
    std::thread::sleep(Duration::from_millis(100));
    for c in clients.iter_mut() {
        c.poll();
    }
    assert_eq!(
        *bob_heard.borrow(),
        0,
        "the kicked client heard nothing more"
    );
}

#[test]
fn regression_reconnect_while_the_old_entry_exists_is_not_room_full() {
    let server = server();
    let proxy = Proxy::start(server.local_addr());
    let mut ann = player(server.local_addr(), "ann");
    let mut bob = player(proxy.addr, "bob");
    let room = room_of_two(&mut ann, &mut bob, 2);
    proxy.cut();
    pump(&mut [&mut ann, &mut bob], |c| !c[1].client().is_welcomed());
    pump(&mut [&mut ann, &mut bob], |c| c[1].client().is_welcomed());
    // The resumed session is still in the room, and told so.
    pump(&mut [&mut ann, &mut bob], |c| {
        c[1].room().is_some_and(|r| r.players.len() == 2)
    });
    // Joining again (what a naive client does after a reconnect) is no "room full".
    accepted(&mut [&mut ann, &mut bob], 1, |c| c.join(room).unwrap());
    assert_eq!(ann.room().unwrap().players.len(), 2);
}

#[test]
fn regression_the_goodbye_is_not_lost_on_disconnect_and_the_host_migrates() {
    let server = server();
    let (mut ann, mut bob) = ann_and_bob(&server);
    room_of_two(&mut ann, &mut bob, 4);
    let ann_id = id(&ann);
    let left: Rc<RefCell<Vec<PlayerLeft>>> = Rc::default();
    let l = left.clone();
    bob.signals()
        .player_left
        .connect(move |p| l.borrow_mut().push(p.clone()));
    let host: Rc<RefCell<Option<ClientId>>> = Rc::default();
    let h = host.clone();
    bob.signals()
        .host_changed
        .connect(move |id| *h.borrow_mut() = Some(*id));
    // The host quits the program: its close is its goodbye.
    ann.close("quit");
    drop(ann);
    pump(&mut [&mut bob], |_| {
        !left.borrow().is_empty() && host.borrow().is_some()
    });
    assert_eq!(left.borrow()[0].id, ann_id);
    assert_eq!(
        *host.borrow(),
        Some(id(&bob)),
        "the host moved to the remaining player"
    );
    assert!(bob.room().unwrap().players[0].host);
}

#[test]
fn late_joiners_receive_the_full_room_state() {
    let server = server();
    let (mut ann, mut bob) = ann_and_bob(&server);
    let mut cat = player(server.local_addr(), "cat");
    let room = room_of_two(&mut ann, &mut bob, 4);
    let clients = &mut [&mut ann, &mut bob, &mut cat];
    accepted(clients, 1, |c| c.set_ready(true).unwrap());
    accepted(clients, 2, |c| c.join(room).unwrap());
    pump(clients, |c| c[2].room().is_some());
    let state = clients[2].room().unwrap();
    let names: Vec<(String, bool, bool)> = state
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

fn fast_server() -> ManagerHandle {
    // 20 Hz entity sync needs the manager to tick at least that often.
    let config = ManagerConfig {
        tick_interval: Duration::from_millis(10),
        ..ManagerConfig::default()
    };
    ServerManager::spawn(BindScope::Loopback, 0, config, RoomsLogic::new()).unwrap()
}

#[test]
fn entities_spawn_update_only_by_owner_or_host_transfer_and_despawn() {
    let server = fast_server();
    let (mut ann, mut bob) = ann_and_bob(&server);
    let mut cat = player(server.local_addr(), "cat");
    let room = room_of_two(&mut ann, &mut bob, 4);
    let clients = &mut [&mut ann, &mut bob, &mut cat];
    accepted(clients, 2, |c| c.join(room).unwrap());
    // bob spawns a ship; everyone sees it with bob as owner.
    accepted(clients, 1, |c| c.spawn("ship", &(0i32, 0i32)).unwrap());
    pump(clients, |c| {
        c.iter()
            .all(|p| p.room().is_some_and(|r| r.entities.len() == 1))
    });
    let ship = clients[0].room().unwrap().entities[0].clone();
    assert_eq!(ship.owner, id(clients[1]));
    // cat is neither owner nor host: refused, nothing changes.
    assert_eq!(
        verdict(clients, 2, |c| c.update(ship.id, &(9i32, 9i32)).unwrap()),
        RequestStatus::Rejected("only the entity's owner or the host may do that".into())
    );
    assert_eq!(
        verdict(clients, 2, |c| c.despawn(ship.id).unwrap()),
        RequestStatus::Rejected("only the entity's owner or the host may do that".into())
    );
    // The owner moves it; the host may too.
    accepted(clients, 1, |c| c.update(ship.id, &(1i32, 2i32)).unwrap());
    pump(clients, |c| {
        c[2].room().unwrap().entities[0].state
            == switchboard::codec::encode_value(&(1i32, 2i32)).unwrap()
    });
    accepted(clients, 0, |c| c.update(ship.id, &(3i32, 4i32)).unwrap());
    // bob hands it to cat, who may now move it, and bob no longer may.
    let cat_id = id(clients[2]);
    accepted(clients, 1, |c| c.transfer(ship.id, cat_id).unwrap());
    pump(clients, |c| {
        c[2].room().unwrap().entities[0].owner == cat_id
    });
    accepted(clients, 2, |c| c.update(ship.id, &(5i32, 6i32)).unwrap());
    assert!(matches!(
        verdict(clients, 1, |c| c.update(ship.id, &(7i32, 7i32)).unwrap()),
        RequestStatus::Rejected(_)
    ));
    accepted(clients, 2, |c| c.despawn(ship.id).unwrap());
    pump(clients, |c| {
        c.iter()
            .all(|p| p.room().is_some_and(|r| r.entities.is_empty()))
    });
}

#[test]
fn changed_only_updates_at_the_sync_rate_and_late_joiners_get_a_snapshot() {
    let server = fast_server();
    let (mut ann, mut bob) = ann_and_bob(&server);
    let room = room_of_two(&mut ann, &mut bob, 4);
    accepted(&mut [&mut ann, &mut bob], 0, |c| {
        c.spawn("ball", &0u32).unwrap()
    });
    pump(&mut [&mut ann, &mut bob], |c| {
        c[1].room().is_some_and(|r| r.entities.len() == 1)
    });
    let ball = ann.room().unwrap().entities[0].id;
    let batches: Rc<RefCell<Vec<usize>>> = Rc::default();
    let b = batches.clone();
    bob.signals()
        .state_updated
        .connect(move |updates| b.borrow_mut().push(updates.len()));
    // 100 updates sent in one burst: bob sees a handful of syncs, not 100,
    // and ends with the last state.
    let mut tickets = Vec::new();
    for n in 1..=100u32 {
        tickets.push(ann.update(ball, &n).unwrap());
    }
    pump(&mut [&mut ann, &mut bob], |_| {
        tickets.iter().all(|t| t.is_done())
    });
    let last = switchboard::codec::encode_value(&100u32).unwrap();
    pump(&mut [&mut ann, &mut bob], |c| {
        c[1].room().unwrap().entities[0].state == last
    });
    let syncs = batches.borrow().len();
    assert!(
        (1..=20).contains(&syncs),
        "{syncs} syncs carried 100 updates"
    );
    // Nothing changes: nothing is sent.
    let before = batches.borrow().len();
    std::thread::sleep(Duration::from_millis(200));
    bob.poll();
    assert_eq!(batches.borrow().len(), before, "no change, no update");
    // A late joiner gets the ball with its latest state.
    let mut cat = player(server.local_addr(), "cat");
    accepted(&mut [&mut ann, &mut bob, &mut cat], 2, |c| {
        c.join(room).unwrap()
    });
    pump(&mut [&mut cat], |c| c[0].room().is_some());
    let snapshot = cat.room().unwrap().entities;
    assert_eq!(snapshot.len(), 1);
    assert_eq!(snapshot[0].state, last);
}
