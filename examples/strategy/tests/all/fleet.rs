//! `strategy --serve --agones`: a real server process against a fake Agones
//! SDK server over real gRPC (`switchboard_agones::fake`).

use std::process::{Command, Stdio};
use std::sync::mpsc;

use switchboard_agones::fake::{FakeSdk, GameServerSetup, Seen};

use crate::player::{Player, WAIT};
use crate::process::{stdout_lines, Reaped};
use crate::scratch::Scratch;

const BIN: &str = env!("CARGO_BIN_EXE_strategy");

/// A fake sidecar (a `players` List of 8) on a runtime of its own.
fn sidecar() -> (tokio::runtime::Runtime, FakeSdk) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let setup = GameServerSetup {
        lists: vec![("players".into(), 8)],
        ..GameServerSetup::default()
    };
    let sdk = runtime.block_on(FakeSdk::start(setup)).unwrap();
    (runtime, sdk)
}

/// `strategy --serve ARGS` (on the fake sidecar, if given) with its
/// stdout's lines on a channel.
fn serve(
    args: &[&str],
    saves: &Scratch,
    sdk: Option<&FakeSdk>,
) -> (Reaped, mpsc::Receiver<String>) {
    let mut command = Command::new(BIN);
    command.args(["--serve", "--port", "0"]).args(args);
    command.arg("--saves").arg(&**saves);
    if let Some(sdk) = sdk {
        command
            .args(["--agones", "--agones-health-secs", "0.2"])
            .env("AGONES_SDK_GRPC_PORT", sdk.port().to_string());
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = stdout_lines(&mut child);
    (Reaped(child), lines)
}

/// What the sidecar saw once the server said Ready.
fn seen_ready(runtime: &tokio::runtime::Runtime, sdk: &FakeSdk) -> Seen {
    runtime
        .block_on(sdk.wait_for(WAIT, |s| s.ready == 1))
        .expect("Ready")
}

/// The port of the next ready line.
fn next_ready(lines: &mpsc::Receiver<String>) -> u16 {
    loop {
        let line = lines.recv_timeout(WAIT).expect("a ready line");
        if let Some(port) = line.strip_prefix("SWITCHBOARD READY 1 ") {
            return port.trim().parse().unwrap();
        }
    }
}

#[test]
fn allocated_a_strategy_server_starts_the_labelled_scenario_and_lists_its_players() {
    let (runtime, sdk) = sidecar();
    let saves = Scratch::new("fleet");
    let (_server, ready) = serve(&[], &saves, Some(&sdk));
    let port = next_ready(&ready);
    let seen = seen_ready(&runtime, &sdk);
    assert_eq!(seen.state, "Ready");
    sdk.allocate(&[("switchboard.dev/scenario", "islands")]);
    // The match's game on the same port.
    assert_eq!(next_ready(&ready), port, "served again");
    let ann = Player::join(format!("127.0.0.1:{port}"), "ann");
    assert_eq!(ann.view.borrow().as_ref().unwrap().scenario, "The Islands");
    let id = ann.client.client_id().unwrap().to_string();
    let seen = runtime
        .block_on(sdk.wait_for(WAIT, |s| s.lists["players"] == [id.clone()]))
        .expect("ann listed");
    assert_eq!(seen.state, "Allocated");
    assert_eq!(seen.ready, 1, "Ready once, across the restart");
}

#[test]
fn a_named_match_is_kept_in_redis_and_resumed_elsewhere_after_sigterm() {
    let redis = switchboard_redis::testing::RedisProcess::start().unwrap();
    let (runtime, sdk) = sidecar();
    let saves = Scratch::new("fleet-named");
    let (mut server, ready) = serve(&["--redis", &redis.url()], &saves, Some(&sdk));
    let port = next_ready(&ready);
    seen_ready(&runtime, &sdk);
    sdk.allocate(&[
        ("switchboard.dev/game", "cup-final"),
        ("switchboard.dev/scenario", "islands"),
    ]);
    assert_eq!(next_ready(&ready), port, "served again");
    let mut ann = Player::join(format!("127.0.0.1:{port}"), "ann");
    assert_eq!(ann.view.borrow().as_ref().unwrap().scenario, "The Islands");
    // Agones deletes the pod: SIGTERM, the players told, exit 0, the
    // game's lease released.
    // SAFETY: kill(2) on our own child.
    assert_eq!(
        unsafe { libc::kill(server.0.id() as i32, libc::SIGTERM) },
        0
    );
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{status}");
    ann.until(|p| !p.client.is_welcomed());
    // Another server takes the game over from its checkpoint at once.
    let (_next, lines) = serve(
        &["--redis", &redis.url(), "--game", "cup-final"],
        &saves,
        None,
    );
    loop {
        let line = lines.recv_timeout(WAIT).expect("the second server's lines");
        assert!(!line.contains("not found"), "{line}");
        if line.contains("resuming game cup-final from its last checkpoint") {
            break;
        }
    }
}

#[test]
fn a_match_naming_no_known_scenario_is_served_the_default_one_never_a_path() {
    let (runtime, sdk) = sidecar();
    let saves = Scratch::new("fleet-bad-label");
    let (_server, ready) = serve(&[], &saves, Some(&sdk));
    let port = next_ready(&ready);
    seen_ready(&runtime, &sdk);
    sdk.allocate(&[("switchboard.dev/scenario", "../../etc/passwd")]);
    assert_eq!(next_ready(&ready), port, "served again");
    let ann = Player::join(format!("127.0.0.1:{port}"), "ann");
    assert_eq!(ann.view.borrow().as_ref().unwrap().scenario, "The Valley");
}
