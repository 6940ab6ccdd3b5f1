//! Rooms across two server processes' worth of managers, a matchmaker and
//! a real Redis: one list of every room, a new room on the least-loaded
//! process, a join routed to the room's process with a seat reservation,
//! capacity and locks counted across them, and a Redis outage that stops
//! new rooms and lists with a clear error while games go on.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use switchboard::{ClientConfig, RequestStatus, RunningServer, ServerManager};
use switchboard_matchmaker::{Matchmaker, MatchmakerConfig, RunningMatchmaker};
use switchboard_redis::testing::RedisProcess;
use switchboard_redis::RoomsPresence;
use switchboard_rooms::directory::{self, Seat};
use switchboard_rooms::{CreateRoom, RoomClient, RoomId, RoomSummary, RoomsLogic};

const WAIT: Duration = Duration::from_secs(10);

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    switchboard::runtime::handle().block_on(future)
}

/// A rooms process in directory mode (a manager of its own).
fn rooms_process(redis: &RedisProcess) -> RunningServer<RoomsLogic> {
    let (link, serving) = block_on(RoomsPresence::join(redis.store())).unwrap();
    let logic = RoomsLogic::new().with_directory(link);
    let handle = ServerManager::builder(logic).spawn().unwrap();
    serving.at(handle.local_addr().to_string());
    handle
}

fn matchmaker(redis: &RedisProcess) -> RunningMatchmaker {
    Matchmaker::builder(redis.store()).spawn().unwrap()
}

fn player(addr: &str, name: &str) -> RoomClient {
    let mut client = RoomClient::connect(addr, ClientConfig::named(name));
    until(|| {
        client.poll();
        client.client().is_welcomed()
    });
    client
}

fn until(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "condition not reached in time");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Asks the matchmaker until `done` (gently: it limits requests per
/// address).
fn until_listed(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "condition not reached in time");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn verdict(client: &mut RoomClient, ticket: switchboard::RequestTicket) -> RequestStatus {
    until(|| {
        client.poll();
        client.status(ticket).is_done()
    });
    client.status(ticket)
}

fn room(name: &str, max_players: u8) -> CreateRoom {
    CreateRoom {
        name: name.into(),
        max_players,
        metadata: Default::default(),
        private: false,
    }
}

fn list(matchmaker: SocketAddr) -> std::io::Result<Vec<RoomSummary>> {
    block_on(directory::list_rooms(matchmaker, WAIT))
}

/// A seat in a new room, once a rooms process has published itself.
fn new_room_seat(matchmaker: SocketAddr) -> Seat {
    let mut seat = None;
    until_listed(|| {
        seat = block_on(directory::reserve_new_room(matchmaker, WAIT)).ok();
        seat.is_some()
    });
    seat.unwrap()
}

/// Creates `name` where the matchmaker says; returns the host and the
/// room's id once the directory lists it.
fn create(matchmaker: SocketAddr, host: &str, name: &str, max: u8) -> (RoomClient, RoomId, String) {
    let seat = new_room_seat(matchmaker);
    let mut client = player(&seat.addr, host);
    let ticket = client
        .create_reserved(&seat.reservation, &room(name, max))
        .unwrap();
    assert_eq!(verdict(&mut client, ticket), RequestStatus::Accepted);
    let id = client.room().unwrap().id;
    until_listed(|| list(matchmaker).unwrap().iter().any(|r| r.id == id));
    (client, id, seat.addr)
}

#[test]
fn one_list_spans_the_processes_and_a_new_room_lands_on_the_least_loaded() {
    let redis = RedisProcess::start().unwrap();
    let (p1, p2) = (rooms_process(&redis), rooms_process(&redis));
    let running = matchmaker(&redis);
    let matchmaker = running.local_addr();
    let (_ann, first, first_addr) = create(matchmaker, "ann", "first", 4);
    // The first process now has a player, the other none.
    let (_bob, second, second_addr) = create(matchmaker, "bob", "second", 4);
    assert_ne!(
        first_addr, second_addr,
        "the second room went to the idle process"
    );
    let addrs = [p1.local_addr().to_string(), p2.local_addr().to_string()];
    assert!(addrs.contains(&first_addr) && addrs.contains(&second_addr));
    let mut names: Vec<(RoomId, String)> = list(matchmaker)
        .unwrap()
        .into_iter()
        .map(|r| (r.id, r.name))
        .collect();
    names.sort();
    let mut expected = vec![(first, "first".to_string()), (second, "second".to_string())];
    expected.sort();
    assert_eq!(names, expected, "one list, both processes");
    assert_ne!(first, second, "room ids are unique across processes");
}

#[test]
fn a_join_goes_to_the_room_s_process_with_a_reserved_seat_and_capacity_holds_across() {
    let redis = RedisProcess::start().unwrap();
    let (_p1, _p2) = (rooms_process(&redis), rooms_process(&redis));
    let running = matchmaker(&redis);
    let matchmaker = running.local_addr();
    let (_ann, id, addr) = create(matchmaker, "ann", "duel", 2);

    let seat = block_on(directory::reserve_seat(matchmaker, id, WAIT)).unwrap();
    assert_eq!(seat.addr, addr, "routed to the process holding the room");
    // One member and one live reservation fill a room of two: a third
    // player is refused by the matchmaker, whichever process it asks from.
    let full = block_on(directory::reserve_seat(matchmaker, id, WAIT)).unwrap_err();
    assert!(full.to_string().contains("that room is full"), "{full}");

    let mut bob = player(&seat.addr, "bob");
    let ticket = bob.join_reserved(&seat.reservation).unwrap();
    assert_eq!(verdict(&mut bob, ticket), RequestStatus::Accepted);
    assert_eq!(bob.room().unwrap().players.len(), 2);

    // The reservation was taken: presented again, by anyone, it admits nobody.
    let mut eve = player(&seat.addr, "eve");
    let ticket = eve.join_reserved(&seat.reservation).unwrap();
    assert!(matches!(
        verdict(&mut eve, ticket),
        RequestStatus::Rejected(why) if why.contains("used")
    ));
    // Nor does a plain join: seats come from the matchmaker.
    let ticket = eve.join(id).unwrap();
    assert!(matches!(
        verdict(&mut eve, ticket),
        RequestStatus::Rejected(why) if why.contains("matchmaker")
    ));
}

#[test]
fn a_locked_room_gets_no_reservation() {
    let redis = RedisProcess::start().unwrap();
    let _p1 = rooms_process(&redis);
    let running = matchmaker(&redis);
    let matchmaker = running.local_addr();
    let (mut ann, id, _) = create(matchmaker, "ann", "private club", 8);
    let ticket = ann.lock(true).unwrap();
    assert_eq!(verdict(&mut ann, ticket), RequestStatus::Accepted);
    until_listed(|| {
        list(matchmaker)
            .unwrap()
            .iter()
            .any(|r| r.id == id && r.locked)
    });
    let locked = block_on(directory::reserve_seat(matchmaker, id, WAIT)).unwrap_err();
    assert!(locked.to_string().contains("locked"), "{locked}");
}

#[test]
fn redis_down_stops_new_rooms_and_lists_with_a_clear_error_while_games_go_on() {
    let mut redis = RedisProcess::start().unwrap();
    let _p1 = rooms_process(&redis);
    let running = matchmaker(&redis);
    let matchmaker = running.local_addr();
    let (mut ann, id, addr) = create(matchmaker, "ann", "game", 4);
    let seat = block_on(directory::reserve_seat(matchmaker, id, WAIT)).unwrap();
    let mut bob = player(&addr, "bob");
    let ticket = bob.join_reserved(&seat.reservation).unwrap();
    assert_eq!(verdict(&mut bob, ticket), RequestStatus::Accepted);

    redis.stop();
    let err = list(matchmaker).unwrap_err().to_string();
    assert!(err.contains("room directory unavailable"), "{err}");
    let err = block_on(directory::reserve_new_room(matchmaker, WAIT))
        .unwrap_err()
        .to_string();
    assert!(err.contains("room directory unavailable"), "{err}");
    // The game in progress does not need Redis.
    let ticket = ann.set_ready(true).unwrap();
    assert_eq!(verdict(&mut ann, ticket), RequestStatus::Accepted);
    until(|| {
        bob.poll();
        bob.room()
            .is_some_and(|r| r.players.iter().any(|p| p.ready))
    });

    redis.restart().unwrap();
    // Redis came back empty; the process publishes its rooms again.
    until_listed(|| list(matchmaker).is_ok_and(|rooms| rooms.iter().any(|r| r.id == id)));
    let again = block_on(directory::reserve_new_room(matchmaker, WAIT));
    assert!(again.is_ok(), "{again:?}");
}

#[test]
fn matchmaker_request_flood_from_one_address_is_cut_off_and_garbage_gets_a_reason() {
    use switchboard::message::TypedMessage;
    use switchboard::socket::{SocketConfig, SocketEvent, SocketStream};
    use switchboard::Message;
    use switchboard_rooms::protocol::RoomAction;

    let redis = RedisProcess::start().unwrap();
    let running = matchmaker(&redis);
    let matchmaker = running.local_addr();
    let outcome = block_on(async move {
        let mut socket = SocketStream::connect(matchmaker, SocketConfig::default());
        // Garbage: an answer with the reason, the connection kept.
        // (A room id's place holds a string: not a `RoomAction::MatchJoin`.)
        let join = RoomAction::MatchJoin(switchboard_rooms::RoomId(1))
            .to_message()
            .unwrap();
        let text = switchboard::codec::encode_value("not a room").unwrap();
        let garbage = Message::from_raw(join.channel_id(), join.action_id(), text.into());
        let refused = socket.ask(&garbage, WAIT).await.unwrap();
        let Ok(RoomAction::MatchRefused(reason)) = refused.typed::<RoomAction>() else {
            panic!("refused with a reason: {refused:?}");
        };
        assert!(reason.contains("malformed"), "{reason}");
        // A flood: past the burst (100), the connection is closed with why.
        let list = RoomAction::MatchList.to_message().unwrap();
        for _ in 0..300 {
            let _ = socket.send(&list);
        }
        let mut answered = 0;
        loop {
            match tokio::time::timeout(WAIT, socket.next_event()).await {
                Ok(Some(SocketEvent::Received(_))) => answered += 1,
                Ok(Some(SocketEvent::Disconnected(reason))) => {
                    return (answered, reason.to_string())
                }
                Ok(Some(_)) => {}
                other => panic!("no disconnect: {other:?}"),
            }
        }
    });
    let (answered, reason) = outcome;
    assert!(answered <= 101, "{answered} answered");
    assert!(reason.contains("too many matchmaker requests"), "{reason}");
}

#[test]
fn a_seat_taken_is_no_longer_held_so_a_leaver_s_seat_frees_at_once() {
    let redis = RedisProcess::start().unwrap();
    let _p1 = rooms_process(&redis);
    let running = matchmaker(&redis);
    let matchmaker = running.local_addr();
    let (_ann, id, addr) = create(matchmaker, "ann", "pair", 2);
    let seat = block_on(directory::reserve_seat(matchmaker, id, WAIT)).unwrap();
    let mut bob = player(&addr, "bob");
    let ticket = bob.join_reserved(&seat.reservation).unwrap();
    assert_eq!(verdict(&mut bob, ticket), RequestStatus::Accepted);
    until_listed(|| {
        list(matchmaker)
            .unwrap()
            .iter()
            .any(|r| r.id == id && r.players == 2)
    });
    // Bob leaves. His reservation was taken when he joined, so the seat is
    // free as soon as the room is published with one member, well within
    // the reservation's 10 s life.
    let started = Instant::now();
    let ticket = bob.leave().unwrap();
    assert_eq!(verdict(&mut bob, ticket), RequestStatus::Accepted);
    let mut again = None;
    until_listed(|| {
        again = block_on(directory::reserve_seat(matchmaker, id, WAIT)).ok();
        again.is_some()
    });
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn matchmaker_seat_hoarding_from_one_address_holds_at_most_its_cap() {
    let redis = RedisProcess::start().unwrap();
    let _process = rooms_process(&redis);
    let running = matchmaker(&redis);
    let matchmaker = running.local_addr();
    let (_ann, id, _) = create(matchmaker, "ann", "hoarded", 4);
    // Asking again and again (under the request rate): each new
    // reservation past the cap gives the address's oldest seat back.
    for _ in 0..10 {
        block_on(directory::reserve_seat(matchmaker, id, WAIT)).unwrap();
    }
    let store = redis.store();
    let seats = store.key(format_args!("rooms:room:{}:seats", id.0));
    let held: usize = block_on(
        store.run(|mut c| async move { redis::cmd("ZCARD").arg(&seats).query_async(&mut c).await }),
    )
    .unwrap();
    assert_eq!(
        held,
        MatchmakerConfig::default().max_reservations_per_address
    );
    // A room of four with one member keeps a seat for someone else.
    let mut room = list(matchmaker).unwrap();
    room.retain(|r| r.id == id);
    assert_eq!(room[0].players, 1);
}

#[test]
fn a_seat_on_a_tls_process_carries_its_fingerprint_and_the_player_pins_it() {
    use switchboard::socket::BindScope;
    use switchboard::tls::{ServerIdentity, TlsServer, TlsSettings};
    let redis = RedisProcess::start().unwrap();
    // A process beyond loopback with a key of its own, reached at this
    // machine's network address (as another machine would).
    let lan = switchboard::socket::lan_address().expect("an address besides loopback");
    let identity = ServerIdentity::generate().unwrap();
    let mut config = switchboard::ManagerConfig::default();
    config.server.tls = TlsSettings::serving(TlsServer::new(&identity).unwrap());
    let (link, serving) = block_on(RoomsPresence::join(redis.store())).unwrap();
    let server = ServerManager::builder(RoomsLogic::new().with_directory(link))
        .config(config)
        .bind(BindScope::AllInterfaces)
        .spawn()
        .unwrap();
    let fingerprint = server.handle().tls().map(|tls| tls.fingerprint());
    assert_eq!(fingerprint, Some(identity.fingerprint()));
    serving.at_pinned(format!("{lan}:{}", server.local_addr().port()), fingerprint);
    let running = matchmaker(&redis);
    let matchmaker = running.local_addr();
    let seat = new_room_seat(matchmaker);
    assert_eq!(
        seat.tls,
        Some(identity.fingerprint().0),
        "the seat names the key"
    );
    // The player pins the process by the seat's fingerprint: TLS, checked.
    let mut ann = RoomClient::connect_via(seat.dialer(), &seat.addr, ClientConfig::named("ann"));
    until(|| {
        ann.poll();
        ann.client().is_welcomed()
    });
    let ticket = ann
        .create_reserved(&seat.reservation, &room("sealed", 4))
        .unwrap();
    assert_eq!(verdict(&mut ann, ticket), RequestStatus::Accepted);
    // A seat naming another key (a forged answer) is refused at the
    // handshake: the player never reaches a server it was not sent to.
    let forged = Seat {
        tls: Some([9; 32]),
        ..seat
    };
    let mut eve = switchboard::NetworkClient::connect_via(
        forged.dialer(),
        &forged.addr,
        ClientConfig::named("eve"),
    );
    let deadline = Instant::now() + WAIT;
    let why = loop {
        assert!(Instant::now() < deadline, "eve was not refused");
        let ended = eve
            .drain_timeout(Duration::from_millis(20))
            .find_map(|event| match event {
                switchboard::ClientEvent::Disconnected(reason)
                | switchboard::ClientEvent::ConnectionLost(reason) => Some(reason.to_string()),
                _ => None,
            });
        if let Some(why) = ended {
            break why;
        }
    };
    assert!(why.contains("not the pinned"), "{why}");
    assert!(!eve.is_welcomed());
}

#[test]
fn a_new_match_goes_to_the_game_server_agones_allocates_over_mutual_tls() {
    use switchboard_agones::allocator::{AllocatedServer, Allocator};
    use switchboard_agones::fake::{FakeAllocator, FakePki};

    let redis = RedisProcess::start().unwrap();
    let (_p1, p2) = (rooms_process(&redis), rooms_process(&redis));
    let dir = tempfile::tempdir().unwrap();
    let pki = FakePki::write(dir.path()).unwrap();
    let second = AllocatedServer {
        name: "switchboard-rooms-x7k2p".into(),
        address: "127.0.0.1".into(),
        ports: [("game".to_string(), p2.local_addr().port())].into(),
    };
    let fake = block_on(FakeAllocator::start(&pki, vec![second])).unwrap();
    let allocator = {
        let _runtime = switchboard::runtime::handle().enter();
        Allocator::new(fake.config(&pki)).unwrap()
    };
    let running = Matchmaker::builder(redis.store())
        .allocator(allocator)
        .spawn()
        .unwrap();
    let matchmaker = running.local_addr();
    // The key is there once a rooms process joined; the seat is on the
    // allocated server, which takes the reservation.
    let seat = new_room_seat(matchmaker);
    assert_eq!(seat.addr, p2.local_addr().to_string());
    let mut host = player(&seat.addr, "ann");
    let ticket = host
        .create_reserved(&seat.reservation, &room("final", 2))
        .unwrap();
    assert_eq!(verdict(&mut host, ticket), RequestStatus::Accepted);
    assert_eq!(fake.asked().len(), 1);
    assert_eq!(running.stats().allocations, 1);
    // The fleet has no server left: the match is refused with the reason.
    let refused = block_on(directory::reserve_new_room(matchmaker, WAIT)).unwrap_err();
    assert!(
        refused.to_string().contains("no game server free"),
        "{refused}"
    );
}
