//! ServerManager and NetworkClient over loopback: sessions, reconnects,
//! validated requests, addressed updates, refusals, abuse, shutdown.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::{Proxy, WAIT};
use switchboard::board::{
    BoardAction, BoardChannel, BoardLogic, Line, Presence, Seats, SetValue, Snapshot, Whisper,
};
use switchboard::manager::protocol::{
    self, ErrorCode, ErrorReply, Hello, Refused, Resume, Welcome,
};
use switchboard::{
    BindScope, ClientConfig, CloseCode, DisconnectReason, ManagerConfig, ManagerHandle, Message,
    NetworkClient, RequestError, RequestStatus, ServerManager, SocketConfig, SocketEvent,
    SocketStream,
};

fn start(config: ManagerConfig) -> ManagerHandle {
    ServerManager::spawn(BindScope::Loopback, 0, config, BoardLogic::new(4)).unwrap()
}

/// Everything a test client heard on the board channel, in order.
#[derive(Default)]
struct Heard {
    lines: Vec<Line>,
    seats: Vec<Seats>,
    snapshots: Vec<Snapshot>,
    presence: Vec<Presence>,
}

fn player(addr: impl ToString, name: &str) -> (NetworkClient, Rc<RefCell<Heard>>) {
    let config = ClientConfig {
        reconnect: switchboard::ReconnectPolicy {
            initial_delay: Duration::from_millis(50),
            ..Default::default()
        },
        ..ClientConfig::named(name)
    };
    let client = NetworkClient::connect(addr, config);
    let heard = Rc::new(RefCell::new(Heard::default()));
    let sink = heard.clone();
    client
        .subscribe(BoardChannel::Board, move |d| {
            let mut heard = sink.borrow_mut();
            match d.action::<BoardAction>() {
                Some(BoardAction::Line) => heard.lines.push(d.content().unwrap()),
                Some(BoardAction::Seats) => heard.seats.push(d.content().unwrap()),
                Some(BoardAction::Snapshot) => heard.snapshots.push(d.content().unwrap()),
                Some(BoardAction::Presence) => heard.presence.push(d.content().unwrap()),
                _ => {}
            }
        })
        .detach();
    (client, heard)
}

/// Polls every client until `done`, failing after [`WAIT`].
fn pump(clients: &mut [&mut NetworkClient], mut done: impl FnMut(&[&mut NetworkClient]) -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done(clients) {
        assert!(Instant::now() < deadline, "condition not reached in time");
        for client in clients.iter_mut() {
            client.poll();
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn all_welcomed(clients: &[&mut NetworkClient]) -> bool {
    clients.iter().all(|c| c.is_welcomed())
}

/// Sends a request and polls until its verdict.
fn ask<T: serde::Serialize>(
    client: &mut NetworkClient,
    others: &mut [&mut NetworkClient],
    action: BoardAction,
    content: &T,
) -> RequestStatus {
    let ticket = client
        .request(BoardChannel::Board, action, content)
        .unwrap();
    let deadline = Instant::now() + WAIT;
    while !ticket.is_done() {
        assert!(Instant::now() < deadline, "no verdict in time");
        client.poll();
        for other in others.iter_mut() {
            other.poll();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    ticket.status()
}

#[test]
fn accepted_update_reaches_exactly_the_clients_it_is_addressed_to() {
    let server = start(ManagerConfig::default());
    let (mut ann, ann_heard) = player(server.local_addr(), "ann");
    let (mut bob, bob_heard) = player(server.local_addr(), "bob");
    let (mut cat, cat_heard) = player(server.local_addr(), "cat");
    pump(&mut [&mut ann, &mut bob, &mut cat], all_welcomed);

    let whisper = Whisper {
        to: bob.client_id().unwrap(),
        text: "psst, bob".into(),
    };
    let verdict = ask(
        &mut ann,
        &mut [&mut bob, &mut cat],
        BoardAction::Whisper,
        &whisper,
    );
    assert_eq!(verdict, RequestStatus::Accepted);
    // A public line after the whisper: once cat has it, anything addressed to
    // cat before it would have arrived too (one ordered stream per client).
    assert_eq!(
        ask(
            &mut ann,
            &mut [&mut bob, &mut cat],
            BoardAction::Say,
            &"hello all"
        ),
        RequestStatus::Accepted
    );
    pump(&mut [&mut ann, &mut bob, &mut cat], |_| {
        cat_heard.borrow().lines.len() == 1 && bob_heard.borrow().lines.len() == 2
    });

    let texts = |heard: &Rc<RefCell<Heard>>| {
        heard
            .borrow()
            .lines
            .iter()
            .map(|l| l.text.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(texts(&ann_heard), ["psst, bob", "hello all"]);
    assert_eq!(texts(&bob_heard), ["psst, bob", "hello all"]);
    assert_eq!(
        texts(&cat_heard),
        ["hello all"],
        "the whisper never reached cat"
    );
    let line = &bob_heard.borrow().lines[0];
    assert_eq!(
        line.from,
        ann.client_id().unwrap(),
        "the server stamped the sender"
    );
    assert!(line.private);
}

#[test]
fn rejected_request_changes_nothing_is_not_broadcast_and_tells_only_the_sender() {
    let server = start(ManagerConfig::default());
    let (mut ann, ann_heard) = player(server.local_addr(), "ann");
    let (mut bob, bob_heard) = player(server.local_addr(), "bob");
    pump(&mut [&mut ann, &mut bob], all_welcomed);

    assert_eq!(
        ask(&mut ann, &mut [&mut bob], BoardAction::Claim, &1u8),
        RequestStatus::Accepted
    );
    let verdict = ask(&mut bob, &mut [&mut ann], BoardAction::Claim, &1u8);
    assert_eq!(verdict, RequestStatus::Rejected("seat 1 is taken".into()));
    assert_eq!(
        ask(&mut bob, &mut [&mut ann], BoardAction::Say, &"marker"),
        RequestStatus::Accepted
    );
    pump(&mut [&mut ann, &mut bob], |_| {
        ann_heard.borrow().lines.len() == 1
    });

    // One seats update each (ann's claim), none for bob's rejected claim.
    for heard in [&ann_heard, &bob_heard] {
        let heard = heard.borrow();
        assert_eq!(heard.seats.len(), 1);
        assert_eq!(heard.seats[0].0.get(&1), Some(&ann.client_id().unwrap()));
    }
    let stats = server.stats_blocking(WAIT).unwrap();
    assert_eq!(stats.rejected_total, 1);
    assert_eq!(stats.accepted_total, 2);
}

#[test]
fn reconnect_after_a_network_cut_keeps_the_id_and_the_session() {
    let server = start(ManagerConfig::default());
    let proxy = Proxy::start(server.local_addr());
    let (mut ann, ann_heard) = player(proxy.addr, "ann");
    let (mut bob, bob_heard) = player(server.local_addr(), "bob");
    pump(&mut [&mut ann, &mut bob], all_welcomed);
    assert_eq!(
        ask(&mut ann, &mut [&mut bob], BoardAction::Claim, &3u8),
        RequestStatus::Accepted
    );
    let id = ann.client_id().unwrap();

    let lost = Rc::new(RefCell::new(Vec::new()));
    let log = lost.clone();
    ann.signals()
        .connection_lost
        .connect(move |reason| log.borrow_mut().push(reason.clone()))
        .detach();
    let resumed = Rc::new(RefCell::new(None));
    let r = resumed.clone();
    ann.signals()
        .welcomed
        .connect(move |w| *r.borrow_mut() = Some(w.clone()))
        .detach();

    proxy.cut();
    pump(&mut [&mut ann, &mut bob], |_| resumed.borrow().is_some());
    let welcomed = resumed.borrow().clone().unwrap();
    assert!(
        welcomed.resumed,
        "the session was resumed, not started anew"
    );
    assert_eq!(welcomed.client, id);
    assert_eq!(ann.client_id(), Some(id));
    assert!(
        matches!(lost.borrow()[0], DisconnectReason::ConnectionLost(_)),
        "{:?}",
        lost.borrow()
    );

    // The resumed client got a snapshot with its seat still its own.
    pump(&mut [&mut ann, &mut bob], |_| {
        ann_heard.borrow().snapshots.len() == 2
    });
    assert_eq!(ann_heard.borrow().snapshots[1].seats.0.get(&3), Some(&id));
    // The others saw it go away and come back.
    pump(&mut [&mut ann, &mut bob], |_| {
        bob_heard
            .borrow()
            .presence
            .iter()
            .any(|p| p.status == "back")
    });
    // ("joined" too, when bob happened to join first.)
    let statuses: Vec<String> = bob_heard
        .borrow()
        .presence
        .iter()
        .filter(|p| p.client == id && p.status != "joined")
        .map(|p| p.status.clone())
        .collect();
    assert_eq!(statuses, ["away", "back"]);
    // And the resumed session still acts as ann.
    assert_eq!(
        ask(&mut ann, &mut [&mut bob], BoardAction::Release, &()),
        RequestStatus::Accepted
    );
    let stats = server.stats_blocking(WAIT).unwrap();
    assert_eq!((stats.joins_total, stats.resumes_total), (2, 1));
}

/// Raw session peer: the test speaks the protocol by hand.
async fn raw_peer(server: &ManagerHandle) -> SocketStream {
    let mut socket = SocketStream::connect(server.local_addr(), SocketConfig::default());
    assert!(matches!(
        common::next_socket_event(&mut socket).await,
        SocketEvent::Connected
    ));
    socket
}

async fn send_hello(socket: &SocketStream, resume: Option<Resume>) {
    let hello = Hello {
        name: "raw".into(),
        password: None,
        credentials: vec![],
        resume,
    };
    socket
        .send(&protocol::session_message(protocol::HELLO, &hello))
        .unwrap();
}

/// The next session-channel message (action, message), skipping board updates.
async fn next_session(socket: &mut SocketStream) -> (u16, Message) {
    loop {
        match common::next_socket_event(socket).await {
            SocketEvent::Received(m) if m.channel_id() == 1 => return (m.action_id(), m),
            SocketEvent::Received(_) => continue,
            other => panic!("expected a session message, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_reused_tokens_are_refused_and_change_nothing() {
    let server = start(ManagerConfig::default());
    let mut first = raw_peer(&server).await;
    send_hello(&first, None).await;
    let (action, m) = next_session(&mut first).await;
    assert_eq!(action, protocol::WELCOME);
    let welcome: Welcome = m.content().unwrap();

    // A forged token for a real id.
    let mut forger = raw_peer(&server).await;
    let forged = switchboard::session::ReconnectToken([7; 32]);
    send_hello(
        &forger,
        Some(Resume {
            client: welcome.client,
            token: forged,
        }),
    )
    .await;
    let (action, m) = next_session(&mut forger).await;
    assert_eq!(action, protocol::REFUSED);
    assert_eq!(
        m.content::<Refused>().unwrap().reason,
        "invalid reconnect token"
    );
    assert!(matches!(
        common::expect_disconnected(&mut forger).await,
        DisconnectReason::ClosedByPeer {
            code: CloseCode::REFUSED,
            ..
        }
    ));

    // The real token works once: it replaces the first connection...
    let mut second = raw_peer(&server).await;
    send_hello(
        &second,
        Some(Resume {
            client: welcome.client,
            token: welcome.token.clone(),
        }),
    )
    .await;
    let (action, m) = next_session(&mut second).await;
    assert_eq!(action, protocol::WELCOME);
    let again: Welcome = m.content().unwrap();
    assert_eq!(again.client, welcome.client);
    assert!(again.resumed);
    assert!(matches!(
        common::expect_disconnected(&mut first).await,
        DisconnectReason::ClosedByPeer {
            code: CloseCode::REPLACED,
            ..
        }
    ));
    // ... and never again.
    let mut replay = raw_peer(&server).await;
    send_hello(
        &replay,
        Some(Resume {
            client: welcome.client,
            token: welcome.token,
        }),
    )
    .await;
    let (action, m) = next_session(&mut replay).await;
    assert_eq!(action, protocol::REFUSED);
    assert_eq!(m.content::<Refused>().unwrap().code, 2);
    // The refusals changed nothing: the live session still works.
    let frame = protocol::RequestFrame {
        id: 9,
        channel: 16,
        action: 1,
        content: switchboard::codec::encode_value("still me").unwrap(),
    };
    second
        .send(&protocol::session_message(protocol::REQUEST, &frame))
        .unwrap();
    let (action, m) = next_session(&mut second).await;
    assert_eq!(
        (action, m.content::<u64>().unwrap()),
        (protocol::ACCEPTED, 9)
    );
    let stats = server.stats().await.unwrap();
    assert_eq!(stats.refused_total, 2);
    assert_eq!(stats.sessions, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_get_typed_errors_and_repeated_abuse_disconnects() {
    let config = ManagerConfig {
        max_strikes: 5,
        ..ManagerConfig::default()
    };
    let server = start(config);
    let mut raw = raw_peer(&server).await;

    // Before the welcome.
    raw.send(&Message::from_raw(
        16,
        1,
        bytes::Bytes::from_static(b"\x02hi"),
    ))
    .unwrap();
    let (action, m) = next_session(&mut raw).await;
    assert_eq!(action, protocol::ERROR);
    assert_eq!(
        m.content::<ErrorReply>().unwrap().code,
        ErrorCode::NotWelcomed
    );

    send_hello(&raw, None).await;
    assert_eq!(next_session(&mut raw).await.0, protocol::WELCOME);
    let cases: [(u16, u16, &[u8], ErrorCode); 3] = [
        (99, 1, b"\x00", ErrorCode::UnknownChannel),
        (16, 77, b"\x00", ErrorCode::UnknownAction),
        (16, 3, b"\xff\xff", ErrorCode::BadContent),
    ];
    for (channel, action, content, expected) in cases {
        raw.send(&Message::from_raw(
            channel,
            action,
            bytes::Bytes::copy_from_slice(content),
        ))
        .unwrap();
        let (reply, m) = next_session(&mut raw).await;
        assert_eq!(reply, protocol::ERROR);
        assert_eq!(m.content::<ErrorReply>().unwrap().code, expected);
    }
    // Two more strikes pass the limit of five (a third may find the
    // connection already closed by the server, which is the point).
    for _ in 0..3 {
        let _ = raw.send(&Message::from_raw(99, 1, bytes::Bytes::new()));
    }
    assert!(matches!(
        common::expect_disconnected(&mut raw).await,
        DisconnectReason::ClosedByPeer {
            code: CloseCode::ABUSE,
            ..
        }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_flood_is_rate_limited_with_an_answer_for_each_drop() {
    let config = ManagerConfig {
        message_rate: switchboard::session::RateLimit {
            per_second: 1.0,
            burst: 10.0,
        },
        max_strikes: 1000,
        ..ManagerConfig::default()
    };
    let server = start(config);
    let mut raw = raw_peer(&server).await;
    send_hello(&raw, None).await; // spends one of the ten
    assert_eq!(next_session(&mut raw).await.0, protocol::WELCOME);
    for i in 0..30u64 {
        let frame = protocol::RequestFrame {
            id: i + 1,
            channel: 16,
            action: 1,
            content: switchboard::codec::encode_value("spam").unwrap(),
        };
        raw.send(&protocol::session_message(protocol::REQUEST, &frame))
            .unwrap();
    }
    let (mut accepted, mut limited) = (0, 0);
    while accepted + limited < 30 {
        let (action, m) = next_session(&mut raw).await;
        match action {
            protocol::ACCEPTED => accepted += 1,
            protocol::ERROR => {
                assert_eq!(
                    m.content::<ErrorReply>().unwrap().code,
                    ErrorCode::RateLimited
                );
                limited += 1;
            }
            other => panic!("unexpected session action {other}"),
        }
    }
    assert_eq!(
        (accepted, limited),
        (9, 21),
        "burst of ten, hello included; every drop answered"
    );
    assert_eq!(server.stats().await.unwrap().rate_limited_total, 21);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_without_hello_is_closed_after_the_hello_timeout() {
    let config = ManagerConfig {
        hello_timeout: Duration::from_millis(300),
        ..ManagerConfig::default()
    };
    let server = start(config);
    let mut raw = raw_peer(&server).await;
    assert!(matches!(
        common::expect_disconnected(&mut raw).await,
        DisconnectReason::ClosedByPeer {
            code: CloseCode::IDLE_TIMEOUT,
            ..
        }
    ));
}

#[test]
fn wrong_password_is_refused_before_an_id_is_given() {
    let server = start(ManagerConfig {
        password: Some("sesame".into()),
        ..ManagerConfig::default()
    });
    let (mut intruder, _) = player(server.local_addr(), "eve");
    let refused = Rc::new(RefCell::new(None));
    let r = refused.clone();
    intruder
        .signals()
        .refused
        .connect(move |why| *r.borrow_mut() = Some(why.clone()))
        .detach();
    pump(&mut [&mut intruder], |c| c[0].is_finished());
    assert_eq!(refused.borrow().as_deref(), Some("wrong password"));
    assert_eq!(intruder.client_id(), None);

    let config = ClientConfig {
        password: Some("sesame".into()),
        ..ClientConfig::named("friend")
    };
    let mut friend = NetworkClient::connect(server.local_addr(), config);
    pump(&mut [&mut friend], all_welcomed);
    let stats = server.stats_blocking(WAIT).unwrap();
    assert_eq!(
        (stats.refused_total, stats.joins_total, stats.sessions),
        (1, 1, 1)
    );
    assert_eq!(stats.clients.len(), 1);
    assert_eq!(stats.clients[0].name, "friend");
}

#[test]
fn leaving_ends_the_session_at_once_and_others_are_told() {
    let server = start(ManagerConfig::default());
    let (mut ann, _) = player(server.local_addr(), "ann");
    let (mut bob, bob_heard) = player(server.local_addr(), "bob");
    pump(&mut [&mut ann, &mut bob], all_welcomed);
    assert_eq!(
        ask(&mut ann, &mut [&mut bob], BoardAction::Claim, &0u8),
        RequestStatus::Accepted
    );
    let id = ann.client_id().unwrap();
    ann.close("quitting");
    pump(&mut [&mut ann, &mut bob], |_| {
        bob_heard
            .borrow()
            .presence
            .iter()
            .any(|p| p.status == "left")
    });
    assert!(ann.is_finished(), "no reconnect after a deliberate close");
    pump(&mut [&mut bob], |_| {
        bob_heard
            .borrow()
            .seats
            .last()
            .is_some_and(|s| s.0.is_empty())
    });
    let stats = server.stats_blocking(WAIT).unwrap();
    assert_eq!(stats.sessions, 1);
    assert!(stats.clients.iter().all(|c| c.id != id));
}

#[test]
fn shutdown_delivers_every_queued_update_before_the_goodbye() {
    let server = start(ManagerConfig::default());
    let (mut ann, _) = player(server.local_addr(), "ann");
    let (mut bob, bob_heard) = player(server.local_addr(), "bob");
    pump(&mut [&mut ann, &mut bob], all_welcomed);
    let changes = Rc::new(RefCell::new(0));
    let c = changes.clone();
    bob.subscribe(BoardChannel::Board, move |d| {
        if d.action() == Some(BoardAction::Changed) {
            *c.borrow_mut() += 1;
        }
    })
    .detach();
    let gone = Rc::new(RefCell::new(None));
    let g = gone.clone();
    bob.signals()
        .disconnected
        .connect(move |why| *g.borrow_mut() = Some(why.clone()))
        .detach();

    // 100 changes, all accepted (so all queued for bob), then shut down at once.
    let mut tickets = Vec::new();
    for i in 0..100 {
        let set = SetValue {
            key: format!("k{i}"),
            value: "v".into(),
        };
        tickets.push(
            ann.request(BoardChannel::Board, BoardAction::Set, &set)
                .unwrap(),
        );
    }
    pump(&mut [&mut ann], |_| tickets.iter().all(|t| t.is_done()));
    assert!(tickets
        .iter()
        .all(|t| t.status() == RequestStatus::Accepted));
    server.shutdown();
    pump(&mut [&mut bob], |_| gone.borrow().is_some());
    assert_eq!(*changes.borrow(), 100, "no queued update lost");
    assert!(matches!(
        gone.borrow().as_ref().unwrap(),
        DisconnectReason::ClosedByPeer { code: CloseCode::GOING_AWAY, reason } if reason == "server shutting down"
    ));
    drop(bob_heard);
}

#[test]
fn request_without_answer_fails_with_a_timeout() {
    // A plain socket server that never answers anything.
    let mut silent =
        switchboard::ExtendedTcpServer::bind(BindScope::Loopback, 0, Default::default()).unwrap();
    let config = ClientConfig {
        request_timeout: Duration::from_millis(300),
        ..ClientConfig::named("ann")
    };
    let mut client = NetworkClient::connect(silent.local_addr(), config);
    let ticket = client
        .request(BoardChannel::Board, BoardAction::Say, &"anyone?")
        .unwrap();
    let deadline = Instant::now() + WAIT;
    while !ticket.is_done() {
        assert!(Instant::now() < deadline);
        silent.poll();
        client.poll_timeout(Duration::from_millis(10));
    }
    assert_eq!(
        ticket.status(),
        RequestStatus::Failed(RequestError::Timeout)
    );
}
