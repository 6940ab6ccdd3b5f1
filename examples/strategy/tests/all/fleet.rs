//! `strategy --serve --agones`: a real server process against a fake Agones
//! SDK server over real gRPC (`switchboard_agones::fake`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use switchboard_agones::fake::{FakeSdk, GameServerSetup};

use crate::player::{Player, WAIT};
use crate::scratch::Scratch;

const BIN: &str = env!("CARGO_BIN_EXE_strategy");

#[test]
fn allocated_a_strategy_server_starts_the_labelled_scenario_and_lists_its_players() {
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
    let saves = Scratch::new("fleet");
    let mut child = Command::new(BIN)
        .args([
            "--serve",
            "--agones",
            "--agones-health-secs",
            "0.2",
            "--port",
            "0",
            "--saves",
        ])
        .arg(&*saves)
        .env("AGONES_SDK_GRPC_PORT", sdk.port().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (lines, ready) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if let Some(port) = line.strip_prefix("SWITCHBOARD READY 1 ") {
                let _ = lines.send(port.trim().parse::<u16>().unwrap());
            }
        }
    });
    let _server = Killed(child);
    let port = ready.recv_timeout(WAIT).expect("the ready line");
    let seen = runtime
        .block_on(sdk.wait_for(WAIT, |s| s.ready == 1))
        .expect("Ready");
    assert_eq!(seen.state, "Ready");
    sdk.allocate(&[("switchboard.dev/scenario", "islands")]);
    // The match's game on the same port.
    let again = ready.recv_timeout(WAIT).expect("served again");
    assert_eq!(again, port);
    let ann = Player::join(format!("127.0.0.1:{port}"), "ann");
    assert_eq!(ann.view.borrow().as_ref().unwrap().scenario, "The Islands");
    let id = ann.client.client_id().unwrap().to_string();
    let seen = runtime
        .block_on(sdk.wait_for(WAIT, |s| s.lists["players"] == [id.clone()]))
        .expect("ann listed");
    assert_eq!(seen.state, "Allocated");
    assert_eq!(seen.ready, 1, "Ready once, across the restart");
}

/// The server process, killed when the test ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
