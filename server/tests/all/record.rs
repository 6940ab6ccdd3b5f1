//! Recording a server's session over real sockets, and replaying it
//! exactly (`docs/RECORDING.md`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use switchboard::manager::RecordConfig;
use switchboard::record::{replay, Input, RecordReader, ReplayError};
use switchboard::{ClientConfig, ManagerConfig, NetworkClient, RequestStatus, ServerManager};
use switchboard_server::board::{Board, BoardLogic, SetValue, Whisper};

use crate::support;

use crate::common;

#[path = "record/mid_game.rs"]
mod mid_game;
#[path = "record/relay.rs"]
mod relay;
#[path = "record/spectate.rs"]
mod spectate;

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
    let text = replay_on_the_command_line(path);
    assert!(text.contains("every one identical"), "{text}");
}

/// `switchboard-server replay FILE`, which must succeed: what it printed.
fn replay_on_the_command_line(path: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard-server"))
        .arg("replay")
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn open(path: &Path) -> RecordReader<std::io::BufReader<std::fs::File>> {
    let file = std::fs::File::open(path).unwrap();
    RecordReader::new(std::io::BufReader::new(file)).unwrap()
}

/// Serves the board recording at `path` to spectators (over TCP and
/// WebSocket) on a thread of its own, following `follow` at `speed`: where
/// spectators connect, and the replay's inputs (checked) once it ends.
fn serve_spectated(
    path: &Path,
    follow: &str,
    speed: f64,
) -> (
    switchboard::spectate::Listening,
    std::thread::JoinHandle<Result<u64, ReplayError>>,
) {
    use switchboard::record::Replayer;
    use switchboard::spectate::{spectate, SpectateConfig};
    let (tx, rx) = std::sync::mpsc::channel();
    let (path, follow) = (path.to_path_buf(), follow.to_string());
    let serving = std::thread::spawn(move || {
        let config = SpectateConfig {
            speed,
            follow: Some(follow),
            websocket: Some(switchboard::WebSocketConfig::on_port(0)),
            ..SpectateConfig::default()
        };
        let replayer = Replayer::new(open(&path), |_| BoardLogic::new(4), Instant::now());
        spectate(replayer, config, |at| tx.send(at).unwrap()).map(|report| report.inputs)
    });
    (rx.recv_timeout(WAIT).unwrap(), serving)
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
