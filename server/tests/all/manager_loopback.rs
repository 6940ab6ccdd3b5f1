//! ServerManager and NetworkClient over loopback, for what is about sockets:
//! a real network cut and the reconnect through it, a shutdown that flushes
//! every queue before its goodbye, a server that never answers. The rules
//! themselves are tested in memory (`manager.rs`).

use crate::common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::{Proxy, WAIT};
use switchboard::{
    BindScope, ClientConfig, CloseCode, DisconnectReason, ManagerConfig, ManagerHandle,
    NetworkClient, RequestError, RequestStatus, RunningServer, ServerManager,
};
use switchboard_server::board::{
    Board, BoardChannel, BoardLogic, Line, Presence, Seats, SetValue, Snapshot,
};

fn start(config: ManagerConfig) -> RunningServer<BoardLogic> {
    ServerManager::builder(BoardLogic::new(4))
        .config(config)
        .spawn()
        .unwrap()
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
    client.subscribe(BoardChannel::Board, move |d| {
        let mut heard = sink.borrow_mut();
        match d.typed::<Board>().unwrap() {
            Board::Line(line) => heard.lines.push(line),
            Board::Seats(seats) => heard.seats.push(seats),
            Board::Snapshot(snapshot) => heard.snapshots.push(snapshot),
            Board::Presence(presence) => heard.presence.push(presence),
            _ => {}
        }
    });
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
fn ask(
    client: &mut NetworkClient,
    others: &mut [&mut NetworkClient],
    request: Board,
) -> RequestStatus {
    let ticket = client.request(request).unwrap();
    let deadline = Instant::now() + WAIT;
    while !client.status(ticket).is_done() {
        assert!(Instant::now() < deadline, "no verdict in time");
        client.poll();
        for other in others.iter_mut() {
            other.poll();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    client.status(ticket)
}

#[test]
fn reconnect_through_a_real_network_cut_keeps_the_id_and_the_session() {
    let server = start(ManagerConfig::default());
    let proxy = Proxy::start(server.local_addr());
    let (mut ann, ann_heard) = player(proxy.addr, "ann");
    let (mut bob, bob_heard) = player(server.local_addr(), "bob");
    pump(&mut [&mut ann, &mut bob], all_welcomed);
    assert_eq!(
        ask(&mut ann, &mut [&mut bob], Board::Claim(3u8)),
        RequestStatus::Accepted
    );
    let id = ann.client_id().unwrap();

    let lost = Rc::new(RefCell::new(Vec::new()));
    let log = lost.clone();
    ann.signals()
        .connection_lost
        .connect(move |reason| log.borrow_mut().push(reason.clone()));
    let resumed = Rc::new(RefCell::new(None));
    let r = resumed.clone();
    ann.signals()
        .welcomed
        .connect(move |w| *r.borrow_mut() = Some(w.clone()));

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
        ask(&mut ann, &mut [&mut bob], Board::Release),
        RequestStatus::Accepted
    );
    let stats = server.stats_blocking(WAIT).unwrap();
    assert_eq!((stats.joins_total, stats.resumes_total), (2, 1));
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
        if let Ok(Board::Changed(_)) = d.typed() {
            *c.borrow_mut() += 1;
        }
    });
    let gone = Rc::new(RefCell::new(None));
    let g = gone.clone();
    bob.signals()
        .disconnected
        .connect(move |why| *g.borrow_mut() = Some(why.clone()));

    // 100 changes, all accepted (so all queued for bob), then shut down at once.
    let mut tickets = Vec::new();
    for i in 0..100 {
        let set = SetValue {
            key: format!("k{i}"),
            value: "v".into(),
        };
        tickets.push(ann.request(Board::Set(set)).unwrap());
    }
    pump(&mut [&mut ann], |clients| {
        tickets.iter().all(|t| clients[0].status(*t).is_done())
    });
    assert!(tickets.iter().all(|t| ann.status(*t).is_accepted()));
    server.handle().shutdown();
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
        switchboard::Endpoint::bind(BindScope::Loopback, 0, Default::default()).unwrap();
    let config = ClientConfig {
        request_timeout: Duration::from_millis(300),
        ..ClientConfig::named("ann")
    };
    let mut client = NetworkClient::connect(silent.local_addr(), config);
    let ticket = client.request(Board::Say("anyone?".into())).unwrap();
    let deadline = Instant::now() + WAIT;
    while !client.status(ticket).is_done() {
        assert!(Instant::now() < deadline);
        silent.poll();
        client.poll_timeout(Duration::from_millis(10));
    }
    assert_eq!(
        client.status(ticket),
        RequestStatus::Failed(RequestError::Timeout)
    );
}

/// A connection from `127.0.0.<from>` that speaks the wire by hand, says
/// hello, and returns the session action the server answered with. Dropping
/// the stream hangs up without a goodbye.
async fn hello_from(from: u8, server: &ManagerHandle) -> (tokio::net::TcpStream, u16) {
    use switchboard::manager::protocol::{self, SessionHello};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, from], 0)))
        .unwrap();
    let mut stream = socket.connect(server.local_addr()).await.unwrap();
    common::raw_handshake(&mut stream).await;
    let hello = SessionHello {
        name: "x".into(),
        password: None,
        credentials: vec![],
        resume: None,
    };
    let frame = protocol::session_message(protocol::HELLO, &hello)
        .encode(&Default::default())
        .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stream, frame.as_bytes())
        .await
        .unwrap();
    loop {
        let (_, body) = tokio::time::timeout(WAIT, common::read_raw_frame(&mut stream))
            .await
            .unwrap()
            .unwrap();
        let message = switchboard::Message::decode(body.into()).unwrap();
        if message.channel_id() == 1 {
            return (stream, message.action_id());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_exhaustion_over_real_sockets_from_other_addresses_cannot_lock_a_player_out() {
    use switchboard::manager::protocol::WELCOME;
    let mut config = ManagerConfig::default();
    config.rules.sessions.max_sessions = 32;
    config.rules.sessions.max_sessions_per_address = 8;
    let server = start(config);
    // Hello and hang up, 8 from each of four addresses: the table is full of
    // sessions waiting out their grace period.
    for from in 2..6 {
        for _ in 0..8 {
            let (socket, answer) = hello_from(from, &server).await;
            assert_eq!(answer, WELCOME);
            drop(socket);
        }
    }
    // Until the server has seen every one hang up.
    let deadline = Instant::now() + WAIT;
    loop {
        let stats = server.stats().await.unwrap();
        assert_eq!(stats.sessions, 32);
        if stats.clients.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the hang-ups seen in time");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A ninth from an attacking address is refused only while its own are
    // online; they are offline, so it takes the place of its oldest.
    let (_again, answer) = hello_from(2, &server).await;
    assert_eq!(answer, WELCOME);
    // A player from an address of its own is welcome.
    let (_player, answer) = hello_from(9, &server).await;
    assert_eq!(answer, WELCOME);
    let stats = server.stats().await.unwrap();
    assert_eq!(stats.sessions, 32);
    assert_eq!(stats.evicted_total, 2);
}
