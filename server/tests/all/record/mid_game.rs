//! Recordings started while the server runs: from a snapshot of the
//! core and its game, or refused with why.

use super::*;
use switchboard::record::Record;

/// Waits until the server's recording is complete.
fn until_complete(server: &switchboard::RunningServer<BoardLogic>) {
    let deadline = Instant::now() + WAIT;
    while !server.handle().recording().is_some_and(|r| r.complete) {
        assert!(Instant::now() < deadline, "the recording never completed");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Pumps `client` until it is welcomed again after its line was cut.
fn until_back(client: &mut NetworkClient) {
    let deadline = Instant::now() + WAIT;
    while client.is_welcomed() {
        assert!(Instant::now() < deadline, "the cut was never noticed");
        client.poll_timeout(Duration::from_millis(5));
    }
    while !client.is_welcomed() {
        assert!(Instant::now() < deadline, "never welcomed back");
        client.poll_timeout(Duration::from_millis(5));
    }
}

#[test]
fn record_started_mid_game_replays_identically_from_its_snapshot() {
    let path = recording("mid-game");
    let server = ServerManager::builder(BoardLogic::new(4)).spawn().unwrap();
    let proxy = common::Proxy::start(server.local_addr());
    // Before the recording: seats taken, a key set, a player who will
    // come back through a cut, one who will leave.
    let mut ann = welcomed(proxy.addr, "ann");
    let mut bob = welcomed(server.local_addr(), "bob");
    assert_eq!(ask(&mut ann, Board::Claim(3)), RequestStatus::Accepted);
    assert_eq!(ask(&mut bob, Board::Claim(1)), RequestStatus::Accepted);
    let set = SetValue {
        key: "level".into(),
        value: "1".into(),
    };
    assert_eq!(ask(&mut bob, Board::Set(set)), RequestStatus::Accepted);
    let ann_id = ann.client_id().unwrap();
    let bob_id = bob.client_id().unwrap();

    let rt = tokio::runtime::Runtime::new().unwrap();
    let handle = server.handle().clone();
    rt.block_on(handle.start_recording(RecordConfig::to(&path)))
        .unwrap();
    let again = rt.block_on(handle.start_recording(RecordConfig::to(recording("second"))));
    assert!(
        matches!(
            again,
            Err(switchboard::manager::StartRecordingError::AlreadyRecording(
                _
            ))
        ),
        "one at a time"
    );

    // After it: what only the snapshot can explain. Seat 3 is ann's, seat
    // 1 bob's; ann comes back with her token after a cut; bob leaves.
    assert_eq!(
        ask(&mut bob, Board::Claim(3)),
        RequestStatus::Rejected("seat 3 is taken".into())
    );
    proxy.cut();
    until_back(&mut ann);
    assert_eq!(ann.client_id(), Some(ann_id), "the same session");
    let set = SetValue {
        key: "level".into(),
        value: "2".into(),
    };
    assert_eq!(ask(&mut ann, Board::Set(set)), RequestStatus::Accepted);
    bob.close("bye");
    bob.poll_timeout(Duration::from_millis(100));
    let mut cyd = welcomed(server.local_addr(), "cyd");
    assert_eq!(ask(&mut cyd, Board::Claim(1)), RequestStatus::Accepted);
    // The clock's work too: ticks and the latency report.
    std::thread::sleep(Duration::from_millis(1100));
    ann.drain().count();
    cyd.drain().count();
    assert!(handle.stop_recording());
    until_complete(&server);
    let live = server.shutdown_blocking().unwrap();

    let mut reader = open(&path);
    assert!(reader.header().logic.ends_with("BoardLogic"));
    assert!(
        matches!(reader.next_record(), Ok(Some(Record::Snapshot(_)))),
        "the first record is the snapshot"
    );
    let report = replay(open(&path), |_| BoardLogic::new(8), Instant::now()).unwrap();
    assert!(report.inputs > 8, "{} inputs", report.inputs);
    assert_eq!(report.stopped.as_deref(), Some("stopped by the operator"));
    // The replayed game ends where the live one did, seats and all.
    assert_eq!(report.logic.get("level"), Some("2"));
    assert_eq!(report.logic.seat_of(ann_id), Some(3));
    assert_eq!(report.logic.seat_of(ann_id), live.seat_of(ann_id));
    let cyd_id = cyd.client_id().unwrap();
    assert_eq!(report.logic.seat_of(cyd_id), Some(1));

    replays_from_the_command_line(&path);
    spectated_from_its_snapshot(&path, ann_id, bob_id);
    let _ = std::fs::remove_file(&path);
}

/// Served to a spectator, the recording shows ann's view from its first
/// moment: she was there before it began (no hello in the recording), and
/// the spectator is her, sent the game as it stood (seats taken and the
/// key set before the snapshot), then what she was sent, her return
/// after the cut included. A spectator who comes later is sent where she
/// stands then.
fn spectated_from_its_snapshot(
    path: &Path,
    ann_id: switchboard::ClientId,
    bob_id: switchboard::ClientId,
) {
    use switchboard_server::board::Snapshot;
    let (at, serving) = serve_spectated(path, "ann", 2.0);
    let addr = at.addr;
    let views_in = |client: &mut NetworkClient, views: &mut Vec<Snapshot>| {
        for event in client.drain_timeout(Duration::from_millis(10)) {
            if let switchboard::ClientEvent::Message(m) = event {
                if let Ok(Board::Snapshot(view)) = m.typed() {
                    views.push(view);
                }
            }
        }
    };
    let mut spectator = NetworkClient::connect(addr, ClientConfig::named("watcher"));
    let (mut views, mut late_views) = (Vec::new(), Vec::new());
    let mut late: Option<NetworkClient> = None;
    let deadline = Instant::now() + WAIT;
    // Her view at the snapshot, then the one she got back after the cut;
    // a spectator who comes after those (none is sent again) is sent
    // where she stands.
    while views.len() < 2 || late_views.is_empty() {
        assert!(Instant::now() < deadline, "{views:?}, late: {late_views:?}");
        views_in(&mut spectator, &mut views);
        match &mut late {
            Some(late) => views_in(late, &mut late_views),
            None if views.len() == 2 => {
                late = Some(NetworkClient::connect(addr, ClientConfig::named("late")));
            }
            None => {}
        }
    }
    assert_eq!(spectator.client_id(), Some(ann_id), "welcomed as ann");
    assert_eq!(late_views[0].you, ann_id);
    assert_eq!(late_views[0].seats.0.get(&3), Some(&ann_id));
    let first = &views[0];
    assert_eq!(first.you, ann_id);
    assert_eq!(first.board.get("level").map(String::as_str), Some("1"));
    assert_eq!(first.seats.0.get(&3), Some(&ann_id));
    assert_eq!(first.seats.0.get(&1), Some(&bob_id));
    assert_eq!(first.players.get(&bob_id).map(String::as_str), Some("bob"));
    // Her return: the same seats (the level changes after it).
    assert_eq!(views[1].seats.0.get(&3), Some(&ann_id));
    let inputs = serving.join().unwrap().unwrap();
    assert!(
        inputs > 8,
        "the replay ran to its end, checked: {inputs} inputs"
    );
}

/// A game that implements no snapshot: a recording cannot start mid-game,
/// and the operator is told why, with what to do instead.
#[test]
fn record_started_mid_game_is_refused_with_why_for_a_game_without_snapshots() {
    use switchboard::manager::{Outbox, Rejection, Request};
    use switchboard::{ClientId, GameLogic, Message};
    struct Silent;
    impl GameLogic for Silent {
        type Message = Message;
        type Command = ();
        fn validate(&self, _: &Request<Message>) -> Result<(), Rejection> {
            Err(Rejection::invalid("nothing to do"))
        }
        fn apply(&mut self, _: ClientId, _: (), _: &mut Outbox) {}
    }
    let server = ServerManager::builder(Silent).spawn().unwrap();
    let path = recording("refused");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let why = rt
        .block_on(server.handle().start_recording(RecordConfig::to(&path)))
        .unwrap_err()
        .to_string();
    assert!(why.contains("takes no snapshot"), "{why}");
    assert!(why.contains("--record FILE"), "{why}");
    assert!(!path.exists(), "no file for a refused recording");
    assert!(server.handle().recording().is_none());
    server.shutdown_blocking().unwrap();
}
