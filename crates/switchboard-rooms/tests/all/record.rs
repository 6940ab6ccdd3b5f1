//! A rooms server recorded over real sockets replays identically
//! (`docs/RECORDING.md`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use switchboard::manager::RecordConfig;
use switchboard::record::{replay, RecordReader};
use switchboard::{ClientConfig, ManagerConfig, RequestStatus, RequestTicket, ServerManager};
use switchboard_rooms::{CreateRoom, RoomClient, RoomsLogic, RpcTarget};

const WAIT: Duration = Duration::from_secs(10);

/// Takes everyone's events until `ticket` of player `who` has its verdict.
fn settle(players: &mut [RoomClient], who: usize, ticket: RequestTicket) -> RequestStatus {
    let deadline = Instant::now() + WAIT;
    while !players[who].status(ticket).is_done() {
        assert!(Instant::now() < deadline, "no verdict in time");
        for player in players.iter_mut() {
            player.poll_timeout(Duration::from_millis(1));
        }
    }
    players[who].status(ticket)
}

/// A room created, joined (a third refused), readied, started, an RPC and
/// an entity; `midway` runs then; then the entity moves over several syncs
/// and a player leaves.
fn play(server: &switchboard::RunningServer<RoomsLogic>, midway: impl FnOnce()) {
    let mut players: Vec<RoomClient> = ["ann", "bob", "cyd"]
        .iter()
        .map(|name| RoomClient::connect(server.local_addr(), ClientConfig::named(*name)))
        .collect();
    let room = CreateRoom {
        name: "den".into(),
        max_players: 2,
        metadata: BTreeMap::from([("map".to_string(), "delta".to_string())]),
        private: false,
    };
    let ticket = players[0].create(&room).unwrap();
    assert_eq!(settle(&mut players, 0, ticket), RequestStatus::Accepted);
    let id = players[0].room().unwrap().id;
    let ticket = players[1].join(id).unwrap();
    assert_eq!(settle(&mut players, 1, ticket), RequestStatus::Accepted);
    // A third is refused: the room is full.
    let ticket = players[2].join(id).unwrap();
    assert!(matches!(
        settle(&mut players, 2, ticket),
        RequestStatus::Rejected(_)
    ));
    for who in 0..2 {
        let ticket = players[who].set_ready(true).unwrap();
        assert_eq!(settle(&mut players, who, ticket), RequestStatus::Accepted);
    }
    let ticket = players[0].start().unwrap();
    assert_eq!(settle(&mut players, 0, ticket), RequestStatus::Accepted);
    let ticket = players[0].call(RpcTarget::All, "greet", "hi").unwrap();
    assert_eq!(settle(&mut players, 0, ticket), RequestStatus::Accepted);
    let ticket = players[0].spawn("ball", &(0u32, 0u32)).unwrap();
    assert_eq!(settle(&mut players, 0, ticket), RequestStatus::Accepted);
    let ball = players[0].room().unwrap().entities[0].id;
    midway();
    // Moves over several syncs (20 Hz): the clock's work is recorded too.
    for step in 0..20u32 {
        let ticket = players[0].update(ball, &(step, step * 2)).unwrap();
        assert_eq!(settle(&mut players, 0, ticket), RequestStatus::Accepted);
        std::thread::sleep(Duration::from_millis(10));
    }
    let ticket = players[1].leave().unwrap();
    assert_eq!(settle(&mut players, 1, ticket), RequestStatus::Accepted);
    for player in players.iter_mut() {
        player.poll_timeout(Duration::from_millis(20));
    }
}

fn replayed(path: &std::path::Path) -> switchboard::record::ReplayReport<RoomsLogic> {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let reader = RecordReader::new(file).unwrap();
    assert!(reader.header().logic.ends_with("RoomsLogic"));
    match replay(reader, |_| RoomsLogic::new(), Instant::now()) {
        Ok(report) => report,
        Err(err) => panic!("{err}"),
    }
}

#[test]
fn record_a_rooms_server_over_real_sockets_and_replay_it_identically() {
    let path = std::env::temp_dir().join(format!("switchboard-rooms-{}.swrec", std::process::id()));
    let config = ManagerConfig {
        record: Some(RecordConfig::to(&path)),
        ..ManagerConfig::default()
    };
    let server = ServerManager::builder(RoomsLogic::new())
        .config(config)
        .spawn()
        .unwrap();
    play(&server, || {});
    server.shutdown_blocking().unwrap();
    let report = replayed(&path);
    assert!(report.inputs > 40, "{} inputs", report.inputs);
    assert!(report.outputs > 40, "{} outputs", report.outputs);
    let _ = std::fs::remove_file(&path);
}

/// Started once the room is playing: the replay starts from the snapshot
/// (rooms, members, the entity, the sync clock) and gives every output of
/// the moves that follow.
#[test]
fn record_a_rooms_server_started_mid_game_and_replay_it_identically() {
    let path = std::env::temp_dir().join(format!(
        "switchboard-rooms-mid-{}.swrec",
        std::process::id()
    ));
    let server = ServerManager::builder(RoomsLogic::new()).spawn().unwrap();
    let handle = server.handle();
    play(&server, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(handle.start_recording(RecordConfig::to(&path)))
            .unwrap();
    });
    server.shutdown_blocking().unwrap();
    let report = replayed(&path);
    assert!(report.inputs > 20, "{} inputs", report.inputs);
    assert!(report.outputs > 20, "{} outputs", report.outputs);
    let _ = std::fs::remove_file(&path);
}
