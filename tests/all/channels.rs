//! The channel layer and `poll()`: slots run on the polling thread, get the
//! sender, action and content, and unrouted messages are counted.

use crate::common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::{Act, Chan};
use switchboard::{
    BindScope, DisconnectReason, Endpoint, EndpointConfig, Message, Socket, SocketConfig,
};

/// A plain socket client (the session-speaking `NetworkClient` is tested
/// against a `ServerManager` in tests/all/manager.rs).
fn client(server: &Endpoint) -> Socket {
    Socket::connect(server.local_addr(), SocketConfig::default())
}

fn say<T: serde::Serialize>(socket: &Socket, channel: Chan, action: Act, content: &T) {
    socket
        .send(&Message::new(channel, action, content).unwrap())
        .unwrap();
}

/// Polls the server and clients until `done` or the deadline.
fn pump(server: &mut Endpoint, clients: &mut [&mut Socket], done: impl Fn() -> bool) {
    let deadline = Instant::now() + common::WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "condition not reached in time");
        server.poll();
        for client in clients.iter_mut() {
            client.poll();
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn poll_runs_slots_on_the_calling_thread_with_sender_action_and_content() {
    let mut server = Endpoint::bind(BindScope::Loopback, 0, EndpointConfig::default()).unwrap();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let log = seen.clone();
    let me = std::thread::current().id();
    let handle = server.handle();
    let _chat = server.subscribe(Chan::Chat, move |delivery| {
        assert_eq!(
            std::thread::current().id(),
            me,
            "slot ran on the polling thread"
        );
        let text: String = delivery.content().unwrap();
        log.borrow_mut()
            .push((delivery.sender, delivery.action::<Act>(), text.clone()));
        handle.broadcast(&delivery.message).unwrap();
    });
    let connected = Rc::new(RefCell::new(Vec::new()));
    let c = connected.clone();
    let _joined = server
        .signals()
        .peer_connected
        .connect(move |(peer, _)| c.borrow_mut().push(*peer));

    let mut alice = client(&server);
    let mut bob = client(&server);
    let bob_heard = Rc::new(RefCell::new(Vec::new()));
    let heard = bob_heard.clone();
    let _bob_chat = bob.signals().received.connect(move |message| {
        assert_eq!(std::thread::current().id(), me);
        heard
            .borrow_mut()
            .push(message.content::<String>().unwrap());
    });
    let c = connected.clone();
    pump(&mut server, &mut [&mut alice, &mut bob], move || {
        c.borrow().len() == 2
    });

    say(&alice, Chan::Chat, Act::Say, &"hello bob");
    let h = bob_heard.clone();
    pump(&mut server, &mut [&mut alice, &mut bob], move || {
        !h.borrow().is_empty()
    });
    assert_eq!(*bob_heard.borrow(), ["hello bob"]);
    let (sender, action, text) = seen.borrow()[0].clone();
    assert!(
        connected.borrow().contains(&sender),
        "the server saw alice's peer id"
    );
    assert_eq!(action, Some(Act::Say));
    assert_eq!(text, "hello bob");
}

#[test]
fn message_without_subscriber_is_counted_not_fatal() {
    let mut server = Endpoint::bind(BindScope::Loopback, 0, EndpointConfig::default()).unwrap();
    let mut client = client(&server);
    let got = Rc::new(RefCell::new(0));
    let g = got.clone();
    let _data = server.subscribe(Chan::Data, move |_| *g.borrow_mut() += 1);
    say(&client, Chan::Nobody, Act::Say, &"anyone?");
    say(&client, Chan::Data, Act::Seq, &1u32);
    let g = got.clone();
    pump(&mut server, &mut [&mut client], move || *g.borrow() == 1);
    assert_eq!(server.unrouted(), 1);
    assert_eq!(server.handle().peer_count(), 1, "still connected");
}

#[test]
fn unsubscribe_and_disconnect_stop_delivery() {
    let mut server = Endpoint::bind(BindScope::Loopback, 0, EndpointConfig::default()).unwrap();
    let mut client = client(&server);
    let hits = Rc::new(RefCell::new(Vec::new()));
    let (a, b) = (hits.clone(), hits.clone());
    let first = server.subscribe(Chan::Chat, move |d| {
        a.borrow_mut().push(("first", d.content::<u32>().unwrap()))
    });
    let _second = server.subscribe(Chan::Data, move |d| {
        b.borrow_mut().push(("second", d.content::<u32>().unwrap()))
    });

    say(&client, Chan::Chat, Act::Seq, &1u32);
    let h = hits.clone();
    pump(&mut server, &mut [&mut client], move || {
        h.borrow().len() == 1
    });
    first.disconnect();
    say(&client, Chan::Chat, Act::Seq, &2u32);
    say(&client, Chan::Data, Act::Seq, &3u32);
    let h = hits.clone();
    pump(&mut server, &mut [&mut client], move || {
        h.borrow().len() == 2
    });
    server.unsubscribe(Chan::Data);
    say(&client, Chan::Data, Act::Seq, &4u32);
    let settle = Instant::now() + Duration::from_millis(200);
    pump(&mut server, &mut [&mut client], move || {
        Instant::now() >= settle
    });
    assert_eq!(*hits.borrow(), [("first", 1), ("second", 3)]);
    assert_eq!(
        server.unrouted(),
        2,
        "message 2 and message 4 had no subscriber"
    );
}

#[test]
fn disconnected_signal_carries_the_reason_to_the_client() {
    let mut server = Endpoint::bind(BindScope::Loopback, 0, EndpointConfig::default()).unwrap();
    let mut client = client(&server);
    let reason = Rc::new(RefCell::new(None));
    let r = reason.clone();
    let _gone = client
        .signals()
        .disconnected
        .connect(move |why| *r.borrow_mut() = Some(why.clone()));
    let up = Rc::new(RefCell::new(false));
    let u = up.clone();
    let _up = server
        .signals()
        .peer_connected
        .connect(move |_| *u.borrow_mut() = true);
    let u = up.clone();
    pump(&mut server, &mut [&mut client], move || *u.borrow());
    let peer = server.handle().peers()[0];
    server.handle().close_peer(peer, "kicked for testing");
    let r = reason.clone();
    pump(&mut server, &mut [&mut client], move || {
        r.borrow().is_some()
    });
    assert!(matches!(
        reason.borrow().as_ref().unwrap(),
        DisconnectReason::ClosedByPeer { reason, .. } if reason == "kicked for testing"
    ));
}
