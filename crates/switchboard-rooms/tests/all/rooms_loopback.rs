//! `RoomClient` over loopback: its RPC handlers, its signals, and its view of
//! the room through a real network cut. The rooms' rules are tested in
//! memory in `rooms.rs`.

use crate::common;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::{Proxy, WAIT};
use switchboard::{
    ClientConfig, ClientId, ManagerConfig, ManagerHandle, ReconnectPolicy, RequestStatus,
    RunningServer, ServerManager,
};
use switchboard_rooms::{CreateRoom, RoomClient, RoomId, RoomsLogic, RpcError, RpcTarget};

fn server() -> RunningServer<RoomsLogic> {
    ServerManager::builder(RoomsLogic::new()).spawn().unwrap()
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
    pump(clients, |c| c[who].status(ticket).is_done());
    clients[who].status(ticket)
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
fn room_client_runs_rpc_handlers_and_reports_unknown_methods() {
    let server = server();
    let (mut ann, mut bob) = ann_and_bob(&server);
    room_of_two(&mut ann, &mut bob, 4);
    let got: Rc<RefCell<Vec<(String, ClientId, u32)>>> = Rc::default();
    for (who, c) in [("ann", &mut ann), ("bob", &mut bob)] {
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
    // By argument, then by who ran it: the call to all reaches ann and bob
    // in either order.
    calls.sort_by(|a, b| (a.2, &a.0).cmp(&(b.2, &b.0)));
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
fn room_client_view_survives_a_real_network_cut() {
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
fn room_client_signals_rejected_joins_and_the_room_list() {
    let server = server();
    let (mut ann, mut bob) = ann_and_bob(&server);
    accepted(&mut [&mut ann, &mut bob], 0, |c| {
        c.create(&new_room("den", 4)).unwrap()
    });
    let rejected = Rc::new(RefCell::new(Vec::new()));
    let r = rejected.clone();
    bob.signals()
        .join_rejected
        .connect(move |why| r.borrow_mut().push(why.clone()));
    bob.join(RoomId(42)).unwrap();
    pump(&mut [&mut ann, &mut bob], |_| !rejected.borrow().is_empty());
    assert_eq!(rejected.borrow()[0], "no such room");
    let listed = Rc::new(RefCell::new(None));
    let l = listed.clone();
    bob.signals()
        .rooms_listed
        .connect(move |list| *l.borrow_mut() = Some(list.clone()));
    bob.list().unwrap();
    pump(&mut [&mut ann, &mut bob], |_| listed.borrow().is_some());
    let names: Vec<String> = listed
        .borrow()
        .as_ref()
        .unwrap()
        .iter()
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(names, ["den"]);
}

#[test]
fn a_websocket_player_and_a_tcp_player_share_one_room() {
    let mut config = ManagerConfig::default();
    config.server.websocket = Some(switchboard::WebSocketConfig::default());
    let server = ServerManager::builder(RoomsLogic::new())
        .config(config)
        .spawn()
        .unwrap();
    let ws = format!("ws://{}/", server.websocket_addr().unwrap());
    let mut ann = player(server.local_addr(), "ann");
    let mut bob = player(&ws, "bob");
    room_of_two(&mut ann, &mut bob, 2);
    // The room is full: one room, whatever the transport.
    let mut cat = player(&ws, "cat");
    let room = ann.room().unwrap().id;
    let verdict = verdict(&mut [&mut ann, &mut bob, &mut cat], 2, |c| {
        c.join(room).unwrap()
    });
    assert!(matches!(verdict, RequestStatus::Rejected(_)), "{verdict:?}");
    // An RPC crosses from the WebSocket player to the TCP one, stamped.
    let got: Rc<RefCell<Vec<(ClientId, String)>>> = Rc::default();
    let g = got.clone();
    ann.register_rpc("greet", move |from, text: String| {
        g.borrow_mut().push((from, text))
    });
    let bob_id = id(&bob);
    accepted(&mut [&mut ann, &mut bob], 1, |c| {
        c.call(RpcTarget::Host, "greet", "hello from a browser")
            .unwrap()
    });
    pump(&mut [&mut ann, &mut bob], |_| !got.borrow().is_empty());
    assert_eq!(
        got.borrow()[0],
        (bob_id, "hello from a browser".to_string())
    );
}
