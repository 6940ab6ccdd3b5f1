//! Recording a server's session over real sockets, and replaying it
//! exactly (`docs/RECORDING.md`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use switchboard::manager::RecordConfig;
use switchboard::record::{replay, Input, Record, RecordReader, ReplayError};
use switchboard::{ClientConfig, ManagerConfig, NetworkClient, RequestStatus, ServerManager};
use switchboard_server::board::{Board, BoardLogic, SetValue, Whisper};

mod support;

#[path = "../../tests/common/mod.rs"]
mod common;

const WAIT: Duration = Duration::from_secs(10);

fn recording(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("switchboard-{tag}-{}.swrec", std::process::id()))
}

fn ask(client: &mut NetworkClient, request: Board) -> RequestStatus {
    let ticket = client.request(request).unwrap();
    client.wait(ticket, WAIT)
}

fn welcomed(addr: std::net::SocketAddr, name: &str) -> NetworkClient {
    let mut client = NetworkClient::connect(addr, ClientConfig::named(name));
    let deadline = Instant::now() + WAIT;
    while !client.is_welcomed() {
        assert!(Instant::now() < deadline, "{name} not welcomed");
        client.poll_timeout(Duration::from_millis(5));
    }
    client
}

/// A board game of four seats, recorded to `path` while two players
/// claim, chat, whisper, set keys, are refused, and one leaves and another
/// comes; returns the live logic.
fn play_recorded(path: &Path) -> BoardLogic {
    let config = ManagerConfig {
        record: Some(RecordConfig {
            initial_state: Some(vec![4]),
            ..RecordConfig::to(path)
        }),
        ..ManagerConfig::default()
    };
    let server = ServerManager::builder(BoardLogic::new(4))
        .config(config)
        .spawn()
        .unwrap();
    let mut ann = welcomed(server.local_addr(), "ann");
    let mut bob = welcomed(server.local_addr(), "bob");
    assert_eq!(ask(&mut ann, Board::Claim(3)), RequestStatus::Accepted);
    assert_eq!(
        ask(&mut bob, Board::Claim(3)),
        RequestStatus::Rejected("seat 3 is taken".into())
    );
    assert_eq!(ask(&mut bob, Board::Claim(1)), RequestStatus::Accepted);
    let set = SetValue {
        key: "level".into(),
        value: "2".into(),
    };
    assert_eq!(ask(&mut ann, Board::Set(set)), RequestStatus::Accepted);
    assert_eq!(
        ask(&mut ann, Board::Say("hello".into())),
        RequestStatus::Accepted
    );
    let whisper = Whisper {
        to: bob.client_id().unwrap(),
        text: "psst".into(),
    };
    assert_eq!(
        ask(&mut ann, Board::Whisper(whisper)),
        RequestStatus::Accepted
    );
    // The clock's work goes in too: ticks, and the latency report.
    std::thread::sleep(Duration::from_millis(1100));
    bob.close("bye");
    bob.poll_timeout(Duration::from_millis(100));
    let mut cyd = welcomed(server.local_addr(), "cyd");
    assert_eq!(ask(&mut cyd, Board::Claim(2)), RequestStatus::Accepted);
    ann.drain().count();
    cyd.drain().count();
    server.shutdown_blocking().unwrap()
}

/// `switchboard-server replay FILE` says every output is the recorded one.
fn replays_from_the_command_line(path: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard-server"))
        .arg("replay")
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("every one identical"), "{text}");
}

fn open(path: &Path) -> RecordReader<std::io::BufReader<std::fs::File>> {
    let file = std::fs::File::open(path).unwrap();
    RecordReader::new(std::io::BufReader::new(file)).unwrap()
}

#[test]
fn record_the_board_game_over_real_sockets_and_replay_it_identically() {
    let path = recording("board");
    let live = play_recorded(&path);
    let reader = open(&path);
    assert_eq!(reader.header().initial_state, Some(vec![4]));
    assert!(reader.header().logic.ends_with("BoardLogic"));
    let seats = reader.header().initial_state.clone().unwrap()[0];
    let report = replay(reader, |_| BoardLogic::new(seats), Instant::now()).unwrap();
    assert!(report.inputs > 20, "{} inputs", report.inputs);
    assert!(report.outputs > 20, "{} outputs", report.outputs);
    assert!(report.span >= Duration::from_secs(1));
    assert!(report.stopped.is_none());
    // The replayed logic ends where the live one did.
    assert_eq!(report.logic.get("level"), Some("2"));
    assert_eq!(live.get("level"), Some("2"));

    replays_from_the_command_line(&path);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn replay_of_a_changed_rule_diverges_at_the_request_it_changes() {
    let path = recording("changed");
    play_recorded(&path);
    // Two seats instead of four: ann's claim of seat 3 is refused now.
    let err = replay(open(&path), |_| BoardLogic::new(2), Instant::now()).unwrap_err();
    let ReplayError::Diverged(divergence) = err else {
        panic!("a divergence, not {err}");
    };
    let Input::Received {
        channel,
        action,
        content,
        ..
    } = &divergence.input
    else {
        panic!("a request diverged: {divergence}");
    };
    assert_eq!((*channel, *action), (1, 4), "a session request");
    assert!(!content.is_empty());
    assert_ne!(divergence.recorded, divergence.replayed);
    // The command line says where.
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard-server"))
        .args(["replay"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the recorded rules replay identically"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn replay_of_a_cut_or_corrupted_recording_is_a_clear_error_never_a_panic() {
    let path = recording("cut");
    play_recorded(&path);
    let bytes = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let replay_bytes = |bytes: Vec<u8>| {
        RecordReader::new(std::io::Cursor::new(bytes))
            .map_err(ReplayError::from)
            .and_then(|reader| replay(reader, |_| BoardLogic::new(4), Instant::now()))
            .map(|report| report.inputs)
    };
    let whole = replay_bytes(bytes.clone()).unwrap();
    // Every cut: an error.
    let step = (bytes.len() / 97).max(1);
    for cut in (0..bytes.len()).step_by(step) {
        let result = replay_bytes(bytes[..cut].to_vec());
        assert!(
            result.is_err(),
            "a recording cut at {cut} of {} replayed",
            bytes.len()
        );
    }
    // Flipped bytes: an error (the stream's checksum, or a record that does
    // not decode), or a divergence; a flip that lands only on the padding
    // bits of the compressed stream changes nothing and replays whole.
    for at in (2..bytes.len()).step_by(step) {
        let mut bad = bytes.clone();
        bad[at] ^= 0x5a;
        if let Ok(inputs) = replay_bytes(bad) {
            assert_eq!(inputs, whole, "byte {at} flipped replayed other inputs");
        }
    }
    // Not a recording at all.
    let err = RecordReader::new(std::io::Cursor::new(b"GET / HTTP/1.1\r\n".to_vec())).unwrap_err();
    assert!(!err.to_string().is_empty());
}

#[test]
fn record_from_the_command_line_then_stop_download_and_start_again_from_the_admin_page() {
    let dir = std::env::temp_dir().join(format!("sb-record-admin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = "t0ken-t0ken-t0ken";
    std::fs::write(dir.join("token"), format!("{token}\n")).unwrap();
    let file = dir.join("game.swrec");
    let token_file = dir.join("token");
    let args: Vec<&std::ffi::OsStr> = ["--port", "0", "--bind", "loopback", "--seats", "4"]
        .into_iter()
        .chain(["--admin-port", "0", "--admin-token-file"])
        .map(std::ffi::OsStr::new)
        .chain([
            token_file.as_os_str(),
            "--record".as_ref(),
            file.as_os_str(),
            "--record-dir".as_ref(),
            dir.as_os_str(),
        ])
        .collect();
    let (child, port, admin) = support::start_with_admin(&args);
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let mut ann = welcomed(addr, "ann");
    assert_eq!(ask(&mut ann, Board::Claim(2)), RequestStatus::Accepted);

    let (status, body) = support::http(&admin, "GET", "/api/recording", None, "");
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"recording\":true") && body.contains("game.swrec"),
        "{body}"
    );
    let (status, _) = support::http(&admin, "GET", "/api/recording/file", Some(token), "");
    assert_eq!(status, 409, "not before it is complete");
    let (status, body) = support::http(&admin, "POST", "/api/recording/start", Some(token), "");
    assert_eq!(status, 409, "one recording at a time");
    let body = String::from_utf8_lossy(&body).into_owned();
    assert!(body.contains("already recording"), "{body}");
    let (status, _) = support::http(&admin, "POST", "/api/recording/stop", None, "");
    assert_eq!(status, 401, "a control needs the token");
    let (status, _) = support::http(&admin, "POST", "/api/recording/stop", Some(token), "");
    assert_eq!(status, 200);
    // The game goes on without it.
    assert_eq!(
        ask(&mut ann, Board::Say("still here".into())),
        RequestStatus::Accepted
    );
    let download = || {
        let deadline = Instant::now() + WAIT;
        loop {
            let (status, bytes) =
                support::http(&admin, "GET", "/api/recording/file", Some(token), "");
            if status == 200 {
                break bytes;
            }
            assert!(Instant::now() < deadline, "the recording never completed");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let reader = RecordReader::new(std::io::Cursor::new(download())).unwrap();
    let report = replay(reader, |_| BoardLogic::new(4), Instant::now()).unwrap();
    assert_eq!(report.stopped.as_deref(), Some("stopped by the operator"));
    assert!(report.inputs >= 3, "{} inputs", report.inputs);

    // Started again from the page, mid-game: a file of the server's
    // naming in --record-dir, beginning with a snapshot.
    let (status, body) = support::http(&admin, "POST", "/api/recording/start", Some(token), "");
    let body = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("board-"), "{body}");
    assert_eq!(
        ask(&mut ann, Board::Claim(2)),
        RequestStatus::Rejected("you already sit there".into()),
        "the seat taken before the recording"
    );
    assert_eq!(
        ask(&mut ann, Board::Say("recorded again".into())),
        RequestStatus::Accepted
    );
    let (status, _) = support::http(&admin, "POST", "/api/recording/stop", Some(token), "");
    assert_eq!(status, 200);
    let reader = RecordReader::new(std::io::Cursor::new(download())).unwrap();
    let report = replay(reader, |_| BoardLogic::new(4), Instant::now()).unwrap();
    assert!(report.inputs >= 2, "the two requests after the snapshot");
    let named = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().starts_with("board-"));
    assert!(named, "the file is in --record-dir");
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

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

    let rt = tokio::runtime::Runtime::new().unwrap();
    let handle = server.handle().clone();
    rt.block_on(handle.start_recording(RecordConfig::to(&path)))
        .unwrap();
    let again = rt.block_on(handle.start_recording(RecordConfig::to(recording("second"))));
    assert!(
        again.unwrap_err().contains("already recording"),
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
    let _ = std::fs::remove_file(&path);
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
        .unwrap_err();
    assert!(why.contains("takes no snapshot"), "{why}");
    assert!(why.contains("--record FILE"), "{why}");
    assert!(!path.exists(), "no file for a refused recording");
    assert!(server.handle().recording().is_none());
    server.shutdown_blocking().unwrap();
}

#[test]
fn replay_served_live_shows_a_spectator_what_the_followed_player_saw() {
    use switchboard::record::Replayer;
    use switchboard::spectate::{spectate, SpectateConfig};
    let path = recording("spectate");
    play_recorded(&path);
    let (tx, rx) = std::sync::mpsc::channel();
    let serving = {
        let path = path.clone();
        std::thread::spawn(move || {
            let config = SpectateConfig {
                speed: 20.0,
                follow: Some("bob".into()),
                ..SpectateConfig::default()
            };
            let replayer = Replayer::new(open(&path), |_| BoardLogic::new(4), Instant::now());
            spectate(replayer, config, |addr| tx.send(addr).unwrap()).map(|report| report.inputs)
        })
    };
    let addr = rx.recv_timeout(WAIT).unwrap();
    // The replay starts at the spectator's hello: every event is read here,
    // from the first (a helper that polled for the welcome or a verdict
    // would take the replayed lines that arrive meanwhile).
    let mut spectator = NetworkClient::connect(addr, ClientConfig::named("watcher"));
    let mut lines = Vec::new();
    let mut ticket = None;
    let deadline = Instant::now() + WAIT;
    loop {
        let verdict = ticket.map(|t| spectator.status(t));
        if verdict.as_ref().is_some_and(|v| v.is_done()) && lines.iter().any(|l| l == "psst") {
            // Nothing can change in a replay.
            assert_eq!(
                verdict.unwrap(),
                RequestStatus::Rejected("this is a replay: watch only".into())
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the whisper to bob or the verdict never came: {lines:?}, {verdict:?}"
        );
        for event in spectator.drain_timeout(Duration::from_millis(20)) {
            if let switchboard::ClientEvent::Message(m) = event {
                if let Ok(Board::Line(line)) = m.typed() {
                    lines.push(line.text);
                }
            }
        }
        if ticket.is_none() && spectator.is_welcomed() {
            ticket = Some(spectator.request(Board::Say("hi".into())).unwrap());
        }
    }
    // Bob heard ann's hello and her whisper; the replay ran to its end.
    assert!(lines.contains(&"hello".to_string()), "{lines:?}");
    let inputs = serving.join().unwrap().unwrap();
    assert!(inputs > 20, "{inputs} inputs");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn replay_served_live_seeks_back_and_the_spectator_sees_it_again() {
    use switchboard::record::Replayer;
    use switchboard::spectate::{spectate_with, SpectateCommand, SpectateConfig};
    let path = recording("seek");
    play_recorded(&path);
    let (tx, rx) = std::sync::mpsc::channel();
    let (commands, control) = tokio::sync::mpsc::unbounded_channel();
    let serving = {
        let path = path.clone();
        std::thread::spawn(move || {
            let config = SpectateConfig {
                follow: Some("bob".into()),
                ..SpectateConfig::default()
            };
            let open = || {
                Ok(Replayer::new(
                    open(&path),
                    |_| BoardLogic::new(4),
                    Instant::now(),
                ))
            };
            spectate_with(open, config, |addr| tx.send(addr).unwrap(), control)
                .map(|report| report.inputs)
        })
    };
    let addr = rx.recv_timeout(WAIT).unwrap();
    let mut spectator = NetworkClient::connect(addr, ClientConfig::named("watcher"));
    let mut lines = Vec::new();
    let mut sought = false;
    let deadline = Instant::now() + WAIT;
    // Bob hears "hello" and "psst"; then the replay goes back to its start
    // and he hears them again, paced as recorded.
    while lines.len() < 4 {
        assert!(Instant::now() < deadline, "lines: {lines:?}");
        for event in spectator.drain_timeout(Duration::from_millis(10)) {
            if let switchboard::ClientEvent::Message(m) = event {
                if let Ok(Board::Line(line)) = m.typed() {
                    lines.push(line.text);
                }
            }
        }
        if !sought && lines.iter().any(|l| l == "psst") {
            commands.send(SpectateCommand::Seek(0)).unwrap();
            sought = true;
        }
    }
    assert_eq!(lines, ["hello", "psst", "hello", "psst"]);
    // It still checks every output, and runs to its end.
    let inputs = serving.join().unwrap().unwrap();
    assert!(inputs > 20, "{inputs} inputs");
    let _ = std::fs::remove_file(&path);
}

/// The relay recorded while bots walk and talk through it over real
/// sockets (`relay --record`, `bots`), stopped with SIGTERM, then replayed
/// by `switchboard-server replay`: every answer of its core the same.
#[test]
fn record_the_relay_over_real_sockets_and_replay_it_identically() {
    let path = recording("relay");
    let args: Vec<String> = ["relay", "--port", "0", "--view-radius", "50", "--record"]
        .iter()
        .map(|s| s.to_string())
        .chain([path.display().to_string()])
        .collect();
    let (mut relay, lines) = support::start_lines(&args);
    let port = support::ready_port(&lines);
    let bots = Command::new(support::BIN)
        .args(["bots", "--addr", &format!("127.0.0.1:{port}")])
        .args(["--count", "12", "--rate", "10", "--seconds", "2", "--walk"])
        .args(["--view-radius", "50", "--world", "120", "--json"])
        .output()
        .unwrap();
    assert!(
        bots.status.success(),
        "{}",
        String::from_utf8_lossy(&bots.stderr)
    );
    support::signal(&relay, libc::SIGTERM);
    assert!(relay.wait().unwrap().success());
    let replayed = Command::new(support::BIN)
        .args(["replay"])
        .arg(&path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&replayed.stdout);
    assert!(
        replayed.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&replayed.stderr)
    );
    assert!(said.contains("every answer identical"), "{said}");
    let calls: u64 = said
        .split("replayed ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    // 12 joins and about 12 × 10 × 2 transforms.
    assert!(calls > 200, "{said}");
    watch_the_relay_recording(&path);
    let _ = std::fs::remove_file(&path);
}

/// `replay FILE --serve PORT` on a relay's recording: a relay client
/// connects and is welcomed as the first recorded bot, hears the others
/// walking near it, is told it may only watch, and the replay, checked as
/// it goes, ends with every answer identical.
fn watch_the_relay_recording(path: &Path) {
    use switchboard::socket::{SocketConfig, SocketEvent, SocketStream};
    use switchboard_relay::{RelayAction, RelayChannel, Relayed, Transform};
    let args: Vec<String> = ["replay".to_string(), path.display().to_string()]
        .into_iter()
        .chain(["--serve", "0", "--speed", "4"].map(String::from))
        .collect();
    let (mut served, lines) = support::start_lines(&args);
    let port = support::ready_port(&lines);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (welcomed, heard, refused) = rt.block_on(async {
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
        let mut spectator = SocketStream::connect(addr, SocketConfig::default());
        let (mut welcomed, mut heard, mut refused) = (None, 0, None);
        let deadline = tokio::time::Instant::now() + WAIT;
        while refused.is_none() || heard < 5 {
            let event = tokio::time::timeout_at(deadline, spectator.next_event())
                .await
                .expect("the spectator heard too little in time");
            match event {
                Some(SocketEvent::Received(m)) => match m.action::<RelayAction>() {
                    Some(RelayAction::Welcome) => {
                        welcomed = m.content::<u32>().ok();
                        // What a spectator sends changes nothing.
                        let moved = Transform {
                            zone: "z".into(),
                            ..Transform::default()
                        };
                        let order = switchboard::Message::new(
                            RelayChannel,
                            RelayAction::Transform,
                            &moved,
                        )
                        .unwrap();
                        spectator.send(&order).unwrap();
                    }
                    Some(RelayAction::Relayed) => {
                        let relayed: Relayed = m.content().unwrap();
                        assert_ne!(Some(relayed.player_id), welcomed, "not its own transforms");
                        heard += 1;
                    }
                    Some(RelayAction::Error) => refused = m.content::<String>().ok(),
                    _ => {}
                },
                Some(_) => {}
                None => panic!("the replay ended before the spectator heard enough: {welcomed:?} {heard} {refused:?}"),
            }
        }
        (welcomed, heard, refused)
    });
    assert!(welcomed.is_some(), "welcomed as a recorded player");
    assert!(heard >= 5, "{heard} transforms heard");
    assert_eq!(refused.as_deref(), Some("this is a replay: watch only"));
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = served.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the served replay never ended");
        std::thread::sleep(Duration::from_millis(20));
    };
    let said: Vec<String> = lines.try_iter().collect();
    assert!(status.success(), "{said:?}");
    assert!(
        said.iter().any(|l| l.contains("every answer identical")),
        "{said:?}"
    );
}
