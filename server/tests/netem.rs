//! Real processes through a real (emulated) network: kernel TCP between
//! two network namespaces through `switchboard-netem`'s link, with delay,
//! loss and an outage (`docs/NETEM.md`). Needs root (CI runs as root);
//! without it each test says so and passes.
#![cfg(target_os = "linux")]

mod support;

use std::time::{Duration, Instant};

use support::{start_command, BIN};
use switchboard::{ClientConfig, ClientEvent, NetworkClient, RequestStatus};
use switchboard_netem::{Link, LinkConfig, NetemError, SERVER_ADDR};
use switchboard_server::board::Board;

/// A link, or `None` (said once) where this process may not make one.
fn link(config: LinkConfig) -> Option<Link> {
    match Link::start(config.clone(), config) {
        Ok(link) => Some(link),
        Err(NetemError::NeedsRoot) => {
            eprintln!("skipped: the network emulator needs root (CI runs as root)");
            None
        }
        Err(err) => panic!("{err}"),
    }
}

/// `switchboard-server ARGS --bind all --port 0` in the link's server
/// namespace, and its port.
fn serve(link: &Link, args: &[&str]) -> (support::Proc, u16) {
    let mut command = link.server_command(BIN);
    command.args(args).args(["--bind", "all", "--port", "0"]);
    start_command(command)
}

/// A tokio runtime whose threads live in the client namespace: what a
/// `NetworkClient` made inside it connects from.
fn client_runtime(link: &Link) -> tokio::runtime::Runtime {
    link.in_client(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    })
    .unwrap()
    .unwrap()
}

/// A tokio runtime whose threads live in the server namespace (a player
/// on the server's own machine: no link between it and the server).
fn server_runtime(link: &Link) -> tokio::runtime::Runtime {
    link.in_server(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
    })
    .unwrap()
    .unwrap()
}

#[test]
fn a_player_through_a_12_second_outage_is_back_with_its_id_and_no_request_made_meanwhile_is_lost_or_applied_twice(
) {
    // The issue: through a 50 ms link down 12 s, a request a second: the
    // player came back with its id, but the 15 requests made while it was
    // down ended as ConnectionLost or Timeout, never sent again.
    let Some(link) = link(LinkConfig {
        delay: Duration::from_millis(25),
        ..LinkConfig::default()
    }) else {
        return;
    };
    let (_board, port) = serve(&link, &[]);
    let addr = format!("{SERVER_ADDR}:{port}");
    // Bob, beside the server, hears every line the board says.
    let beside = server_runtime(&link);
    let mut bob = {
        let _inside = beside.enter();
        NetworkClient::connect(addr.clone(), ClientConfig::named("bob"))
    };
    let mut lines = Vec::<String>::new();
    let listen = |bob: &mut NetworkClient, lines: &mut Vec<String>| {
        for event in bob.drain() {
            if let ClientEvent::Message(message) = event {
                if let Ok(Board::Line(line)) = message.typed::<Board>() {
                    lines.push(line.text);
                }
            }
        }
    };
    let runtime = client_runtime(&link);
    let _inside = runtime.enter();
    let mut ann = NetworkClient::connect(addr, ClientConfig::named("ann"));
    support::wait_until("both welcomed", Duration::from_secs(10), || {
        ann.poll();
        listen(&mut bob, &mut lines);
        ann.is_welcomed() && bob.is_welcomed()
    });
    let id = ann.client_id().unwrap();
    let cut = Instant::now();
    link.cut(Duration::from_secs(12));
    // A request a second while it is down.
    let mut tickets = Vec::new();
    for i in 0..12 {
        tickets.push(ann.request(Board::Say(format!("during {i}"))).unwrap());
        let next = cut + Duration::from_secs(i + 1);
        while Instant::now() < next {
            ann.poll();
            listen(&mut bob, &mut lines);
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    assert!(link.stats().0.outage > 0, "the outage cut packets");
    // Back: the same id, every request with one verdict, accepted.
    support::wait_until("every verdict", Duration::from_secs(40), || {
        ann.poll();
        listen(&mut bob, &mut lines);
        tickets.iter().all(|t| ann.status(*t).is_done())
    });
    assert_eq!(ann.client_id(), Some(id));
    for ticket in &tickets {
        assert_eq!(ann.status(*ticket), RequestStatus::Accepted);
    }
    let expected: Vec<String> = (0..12).map(|i| format!("during {i}")).collect();
    support::wait_until("bob heard them", Duration::from_secs(10), || {
        listen(&mut bob, &mut lines);
        lines.len() >= 12
    });
    assert_eq!(lines, expected, "each once, in order");
    println!(
        "back with the same id; 12 requests made during the outage all applied once, the last verdict {:.1} s after the cut",
        cut.elapsed().as_secs_f64()
    );
}

/// The load tester's report of bots in the client namespace against a
/// relay in the server namespace.
fn relay_lateness(loss: f64) -> Option<serde_json::Value> {
    let link = link(LinkConfig {
        delay: Duration::from_millis(25),
        jitter: Duration::from_millis(2),
        loss,
        seed: 11,
        ..LinkConfig::default()
    })?;
    let (_relay, port) = serve(&link, &["relay"]);
    let out = link
        .client_command(BIN)
        .args(["bots", "--addr", &format!("{SERVER_ADDR}:{port}")])
        .args([
            "--count",
            "8",
            "--rate",
            "20",
            "--zone-size",
            "8",
            "--seconds",
            "6",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("the load tester's JSON"))
}

#[test]
fn relay_transforms_over_tcp_through_one_and_five_percent_loss_arrive_late_but_all_arrive() {
    // The baseline the QUIC issue measures against: over TCP a lost segment
    // holds back every transform behind it.
    let mut rows = Vec::new();
    for loss in [0.0, 0.01, 0.05] {
        let Some(report) = relay_lateness(loss) else {
            return;
        };
        let ms = |key: &str| report[key].as_f64().unwrap_or(f64::NAN);
        println!(
            "relay over TCP, 8 bots x 20 Hz, 25 +- 2 ms each way, {:.0} % loss: lateness p50 {:.1} ms, p95 {:.1}, p99 {:.1}, max {:.1}; lost {}",
            loss * 100.0,
            ms("latency_ms_p50"),
            ms("latency_ms_p95"),
            ms("latency_ms_p99"),
            ms("latency_ms_max"),
            report["lost"]
        );
        assert_eq!(report["lost"], 0, "TCP loses nothing: {report}");
        assert_eq!(report["disconnects"], 0, "{report}");
        rows.push((ms("latency_ms_p50"), ms("latency_ms_p99")));
    }
    // Two crossings of the link: 50 ms is the floor.
    assert!(
        rows.iter().all(|(p50, _)| (50.0..80.0).contains(p50)),
        "{rows:?}"
    );
    assert!(rows[0].1 < 80.0, "no loss, no stall: {rows:?}");
    assert!(
        rows[2].1 > 100.0,
        "at 5 % loss retransmissions hold transforms back: {rows:?}"
    );
}
