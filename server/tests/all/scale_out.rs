//! Scale-out with real processes and a real Redis: two board servers share
//! their sessions; the one a client plays on is killed (SIGKILL), and the
//! client resumes on the other with its id. Two rooms servers and a
//! matchmaker: one room list, new rooms spread, joins routed.

use crate::support;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use support::Proc;
use switchboard::{ClientConfig, NetworkClient, ReconnectPolicy, RequestStatus};
use switchboard_redis::testing::RedisProcess;
use switchboard_server::board::Board;

const WAIT: Duration = Duration::from_secs(15);

fn board_server(redis: &RedisProcess) -> (Proc, String) {
    let url = redis.url();
    start(&[
        "--port",
        "0",
        "--bind",
        "loopback",
        "--grace-secs",
        "30",
        "--redis",
        &url,
    ])
}

/// Starts `switchboard-server ARGS`; returns it and its address.
fn start(args: &[&str]) -> (Proc, String) {
    let (proc, port) = support::start(args);
    (proc, format!("127.0.0.1:{port}"))
}

/// Whether Redis holds `client`'s session.
fn session_stored(redis: &RedisProcess, client: switchboard::ClientId) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = redis.store();
        let key = store.key(format_args!("session:{client}"));
        store
            .run(|mut c| async move {
                redis::cmd("EXISTS")
                    .arg(&key)
                    .query_async::<bool>(&mut c)
                    .await
            })
            .await
            .unwrap_or(false)
    })
}

fn wait_until(what: &str, done: impl FnMut() -> bool) {
    support::wait_until(what, WAIT, done)
}

fn say(client: &mut NetworkClient, line: &str) -> RequestStatus {
    support::ask(client, Board::Say(line.into()), WAIT)
}

#[test]
fn a_client_whose_server_is_killed_resumes_on_another_with_its_id() {
    let redis = RedisProcess::start().unwrap();
    let (a_proc, a) = board_server(&redis);
    let (_b_proc, b) = board_server(&redis);
    let config = ClientConfig {
        fallback_servers: vec![b.clone()],
        reconnect: ReconnectPolicy {
            initial_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(200),
            ..ReconnectPolicy::default()
        },
        ..ClientConfig::named("ada")
    };
    let mut client = NetworkClient::connect(&a, config);
    let welcomes = Rc::new(RefCell::new(Vec::new()));
    let sink = welcomes.clone();
    client
        .signals()
        .welcomed
        .connect(move |w| sink.borrow_mut().push((w.client, w.resumed)));
    wait_until("welcome on A", || {
        client.poll();
        client.is_welcomed()
    });
    let id = client.client_id().unwrap();
    assert_eq!(say(&mut client, "on A"), RequestStatus::Accepted);
    // A writes the session to Redis just after its welcome; once it is
    // there, A is killed outright.
    wait_until("the session in Redis", || session_stored(&redis, id));
    drop(a_proc);

    wait_until("welcome on B", || {
        client.poll();
        welcomes.borrow().len() == 2
    });
    assert_eq!(welcomes.borrow()[1], (id, true), "the same id, resumed");
    assert_eq!(client.client_id(), Some(id));
    assert_eq!(say(&mut client, "on B"), RequestStatus::Accepted);
}

#[test]
fn rooms_servers_and_a_matchmaker_share_one_room_list_and_spread_new_rooms() {
    use switchboard_rooms::directory;
    use switchboard_rooms::{CreateRoom, RoomClient};

    let redis = RedisProcess::start().unwrap();
    let url = redis.url();
    let rooms_server = || {
        start(&[
            "rooms", "--bind", "loopback", "--port", "0", "--redis", &url,
        ])
    };
    let (_r1, r1) = rooms_server();
    let (_r2, r2) = rooms_server();
    let args = [
        "matchmaker",
        "--port",
        "0",
        "--redis",
        &url,
        "--admin-port",
        "0",
    ];
    let (_mm, mm, admin) = support::start_with_admin(&args.map(std::ffi::OsStr::new));
    let matchmaker: std::net::SocketAddr = format!("127.0.0.1:{mm}").parse().unwrap();
    let rt = switchboard::runtime::handle();

    let mut hosts = Vec::new();
    for name in ["first", "second"] {
        let mut seat = None;
        wait_until("a rooms server in the directory", || {
            seat = rt
                .block_on(directory::reserve_new_room(matchmaker, WAIT))
                .ok();
            seat.is_some() || {
                std::thread::sleep(Duration::from_millis(100));
                false
            }
        });
        let seat = seat.unwrap();
        let mut host = RoomClient::connect(&seat.addr, ClientConfig::named("host"));
        let room = CreateRoom {
            name: name.into(),
            max_players: 4,
            metadata: Default::default(),
            private: false,
        };
        let ticket = host.create_reserved(&seat.reservation, &room).unwrap();
        wait_until("created", || {
            host.poll();
            host.status(ticket).is_done()
        });
        assert_eq!(host.status(ticket), RequestStatus::Accepted);
        // Listed (with its player) before the next one is placed.
        let id = host.room().unwrap().id;
        wait_until("listed", || {
            let listed = rt.block_on(directory::list_rooms(matchmaker, WAIT));
            std::thread::sleep(Duration::from_millis(100));
            listed.is_ok_and(|rooms| rooms.iter().any(|r| r.id == id && r.players == 1))
        });
        hosts.push((host, seat.addr));
    }
    let servers: Vec<&str> = hosts.iter().map(|(_, addr)| addr.as_str()).collect();
    let mut expected = vec![r1.as_str(), r2.as_str()];
    let mut got = servers.clone();
    expected.sort();
    got.sort();
    assert_eq!(got, expected, "one room on each server");
    let listed = rt
        .block_on(directory::list_rooms(matchmaker, WAIT))
        .unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");

    // The operator sees the same in the matchmaker's metrics.
    let (status, metrics) = support::http(&admin, "GET", "/metrics", None, "");
    assert_eq!(status, 200);
    let metrics = String::from_utf8(metrics).unwrap();
    let value = |name: &str| -> u64 {
        let line = metrics.lines().find(|l| l.starts_with(&format!("{name} ")));
        line.and_then(|l| l.split(' ').nth(1)?.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {metrics}"))
    };
    assert_eq!(value("switchboard_matchmaker_seats_total"), 2);
    assert!(value("switchboard_matchmaker_lists_total") >= 3);
    assert_eq!(value("switchboard_matchmaker_directory_errors_total"), 0);
}
