//! The strategy game through a real (emulated) network: its dedicated
//! server in one network namespace, two bot players in the other, 75 ms
//! each way (a 150 ms round trip) and 2 % loss each way
//! (`docs/NETEM.md`). Needs root (CI runs as root); without it, it says so
//! and passes. A module of the e2e binary (one binary fewer to link).

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use switchboard_netem::{Link, LinkConfig, NetemError, SERVER_ADDR};

use super::{Scratch, BIN};

#[test]
fn two_bots_play_two_turns_through_a_150_ms_round_trip_and_2_percent_loss() {
    let path = LinkConfig {
        delay: Duration::from_millis(75),
        loss: 0.02,
        seed: 5,
        ..LinkConfig::default()
    };
    let link = match Link::start(path.clone(), path) {
        Ok(link) => link,
        Err(NetemError::NeedsRoot) => {
            eprintln!("skipped: the network emulator needs root (CI runs as root)");
            return;
        }
        Err(err) => panic!("{err}"),
    };
    let saves = Scratch::new("netem");
    let mut server = link
        .server_command(BIN)
        .args(["--serve", "--bind", "all", "--port", "0", "--saves"])
        .arg(&*saves)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(server.stdout.take().unwrap());
    let port: u16 = stdout
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("SWITCHBOARD READY 1 ")?.trim().parse().ok())
        .expect("ready line");
    let addr = format!("{SERVER_ADDR}:{port}");
    let bot = |name: &str| {
        let mut bot = link.client_command(BIN);
        bot.args([
            "--join",
            &addr,
            "--name",
            name,
            "--text",
            "--bot",
            "2",
            "--players",
            "2",
        ])
        .stdout(Stdio::piped());
        bot
    };
    // The first to join hosts, and starts once both are seated: bob joins
    // once ann has joined.
    let mut host = bot("ann").spawn().unwrap();
    let mut ann_lines = BufReader::new(host.stdout.take().unwrap()).lines();
    let mut ann_said = String::new();
    for line in ann_lines.by_ref().map_while(Result::ok) {
        ann_said.push_str(&line);
        ann_said.push('\n');
        if line.starts_with("joined as ") {
            break;
        }
    }
    let rest = std::thread::spawn(move || {
        let mut said = ann_said;
        for line in ann_lines.map_while(Result::ok) {
            said.push_str(&line);
            said.push('\n');
        }
        said
    });
    let guest = bot("bob").output().unwrap();
    let status = host.wait().unwrap();
    let ann_said = rest.join().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let bob_said = String::from_utf8_lossy(&guest.stdout);
    for (who, ok, text) in [
        ("ann", status.success(), &*ann_said),
        ("bob", guest.status.success(), &*bob_said),
    ] {
        assert!(ok, "{who}: {text}");
        assert!(text.contains("bot finished at turn 3"), "{who}: {text}");
    }
    // Both were shown the server's key, as ssh shows it (the game crossed
    // the link in TLS): the first join remembered it, the second was
    // checked against it.
    let key = |text: &str| {
        text.lines().find_map(|l| {
            Some(
                l.split_once("the host's key: sha256 ")?
                    .1
                    .get(..64)?
                    .to_string(),
            )
        })
    };
    assert!(key(&ann_said).is_some(), "ann: {ann_said}");
    assert_eq!(key(&ann_said), key(&bob_said), "bob: {bob_said}");
    let (up, down) = link.stats();
    println!("two turns through 75 ms each way and 2 % loss: {up:?} / {down:?}");
    assert!(
        up.delivered > 0 && down.delivered > 0,
        "the game went through the link"
    );
}
