//! Hosting for other machines (`--host --bind all`): the game asks the
//! home router to forward its port, the player reads where the internet
//! joins, and the mapping goes when the host quits with Ctrl-C. The router
//! is the hosting crate's fake UPnP gateway on loopback.

#[path = "../../../crates/switchboard-hosting/tests/hosting/fake_upnp.rs"]
#[allow(dead_code)]
mod fake_upnp;
mod scratch;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_strategy");

/// The first line of `lines` containing `text`, within 20 s.
fn line_with(lines: &mpsc::Receiver<String>, text: &str) -> String {
    loop {
        match lines.recv_timeout(Duration::from_secs(20)) {
            Ok(line) if line.contains(text) => return line,
            Ok(_) => {}
            Err(e) => panic!("no line with {text:?}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upnp_host_reads_where_the_internet_joins_and_ctrl_c_removes_the_mapping() {
    let igd = fake_upnp::FakeIgd::start(fake_upnp::Behaviour::default()).await;
    let saves = scratch::Scratch::new("hosting-upnp");
    let mut host = Command::new(BIN)
        .args(["--host", "--bind", "all", "--name", "ann", "--text"])
        // A bot that waits in the lobby for a second player.
        .args(["--bot", "1", "--players", "2"])
        // No PCP or NAT-PMP on this "router": refused at once, then UPnP.
        .args(["--gateway", "127.0.55.1", "--upnp-search"])
        .arg(igd.search.to_string())
        .arg("--saves")
        .arg(&*saves)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(host.stdout.take().unwrap());
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let started = line_with(&lines, "on port ");
    let port: u16 = started.rsplit(' ').next().unwrap().parse().unwrap();
    let mapped = line_with(&lines, "port mapping");
    assert_eq!(
        mapped,
        format!("* port mapping: game port {port}: reachable at 203.0.113.9:{port} through UPnP")
    );
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(host.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let removed = line_with(&lines, "port mapping");
    assert_eq!(
        removed,
        format!("port mapping: the UPnP mapping of 203.0.113.9:{port} was removed")
    );
    assert_eq!(host.wait().unwrap().code(), Some(130));
    assert_eq!(
        igd.seen().last(),
        Some(&fake_upnp::Seen::Delete {
            external_port: port
        })
    );
}
