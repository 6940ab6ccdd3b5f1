//! Hosting from home with real server processes: `--map-port` against the
//! fake gateways of the hosting crate's tests (the line a host reads, the
//! mapping removed on Ctrl-C or SIGTERM), and `switchboard-server
//! rendezvous` with a board server taking players through it.

use crate::support;

#[path = "../../../crates/switchboard-hosting/tests/hosting/fake_nat.rs"]
#[allow(dead_code)]
mod fake_nat;
#[path = "../../../crates/switchboard-hosting/tests/hosting/fake_upnp.rs"]
#[allow(dead_code)]
mod fake_upnp;

use std::process::Command;
use std::time::Duration;

use support::{line_starting, ready_port, signal, start_lines as start, BIN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upnp_board_server_says_where_the_internet_joins_and_ctrl_c_removes_the_mapping() {
    let igd = fake_upnp::FakeIgd::start(fake_upnp::Behaviour::default()).await;
    let args: Vec<String> = [
        "--bind",
        "all",
        "--port",
        "0",
        "--map-port",
        // Nothing answers PCP or NAT-PMP here: refused at once, then UPnP.
        "--gateway",
        "127.0.54.1",
        "--upnp-search",
        &igd.search.to_string(),
        "--map-timeout-secs",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (mut child, lines) = start(&args);
    let port = ready_port(&lines);
    let mapped = line_starting(&lines, "port mapping");
    assert_eq!(
        mapped,
        format!("port mapping (game port {port}): reachable at 203.0.113.9:{port} through UPnP")
    );
    signal(&child, libc::SIGINT);
    let removed = line_starting(&lines, "port mapping");
    assert_eq!(
        removed,
        format!(
            "port mapping (game port {port}): the UPnP mapping of 203.0.113.9:{port} was removed"
        )
    );
    assert!(child.wait().unwrap().success());
    assert_eq!(
        igd.seen().last(),
        Some(&fake_upnp::Seen::Delete {
            external_port: port
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pcp_relay_maps_its_native_websocket_and_quic_ports_and_sigterm_removes_them() {
    let gateway = fake_nat::FakeNatGateway::start(fake_nat::Behaviour::default()).await;
    let args: Vec<String> = [
        "relay",
        "--bind",
        "all",
        "--port",
        "0",
        "--ws-port",
        "0",
        "--quic-port",
        "0",
        "--map-port",
        "--gateway",
        &gateway.ip.to_string(),
        "--upnp-search",
        "127.0.0.1:9",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (mut child, lines) = start(&args);
    let port = ready_port(&lines);
    let mut mapped: Vec<String> = (0..3)
        .map(|_| line_starting(&lines, "port mapping"))
        .collect();
    mapped.sort();
    assert!(
        mapped[0].starts_with("port mapping (QUIC port "),
        "{mapped:?}"
    );
    assert!(
        mapped[1].starts_with("port mapping (WebSocket port "),
        "{mapped:?}"
    );
    assert_eq!(
        mapped[2],
        format!("port mapping (relay port {port}): reachable at 203.0.113.7:{port} through PCP")
    );
    signal(&child, libc::SIGTERM);
    let removed: Vec<String> = (0..3)
        .map(|_| line_starting(&lines, "port mapping"))
        .collect();
    assert!(
        removed.iter().all(|l| l.ends_with("was removed")),
        "{removed:?}"
    );
    assert!(child.wait().unwrap().success());
    let deletions = gateway
        .seen()
        .iter()
        .filter(|s| matches!(s, fake_nat::Seen::PcpMap { lifetime: 0, .. }))
        .count();
    assert_eq!(deletions, 3, "{:?}", gateway.seen());
    // The QUIC port is UDP, mapped and removed as such.
    let mut protocols = gateway.protocols();
    protocols.sort();
    assert_eq!(protocols, ["TCP", "TCP", "TCP", "TCP", "UDP", "UDP"]);
}

#[test]
fn map_port_on_loopback_is_refused_with_the_reason() {
    let out = Command::new(BIN)
        .args(["--port", "0", "--map-port"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("--map-port needs --bind all"), "{text}");
}

#[test]
fn join_code_board_server_behind_the_rendezvous_binary_takes_players_by_code() {
    use switchboard_server::board::Board;
    // The public relay.
    let args: Vec<String> = ["rendezvous", "--port", "0", "--ws-port", "0"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (mut relay, relay_lines) = start(&args);
    let relay_port = ready_port(&relay_lines);
    let ws = line_starting(&relay_lines, "WebSocket clients: ws://");
    let ws = ws["WebSocket clients: ws://".len()..]
        .trim_end_matches('/')
        .to_string();
    // A board server at home, on loopback only: reachable through the relay.
    let relay_addr = format!("127.0.0.1:{relay_port}");
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().to_str().unwrap();
    let args: Vec<String> = [
        "--port",
        "0",
        "--rendezvous",
        &relay_addr,
        "--data-dir",
        dir,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (mut board, board_lines) = start(&args);
    let news = line_starting(&board_lines, "join-code relay: join code ");
    let code = news["join-code relay: join code ".len()..]
        .split(':')
        .next()
        .unwrap()
        .to_string();
    // Players pin the host by the fingerprint the line gives: the relay
    // pipes TLS between them it cannot read.
    let (_, fingerprint) = news
        .split_once(&format!("--join {code}@{relay_addr} --trust "))
        .unwrap_or_else(|| panic!("{news}"));
    let fingerprint = fingerprint.trim().parse().unwrap();
    // The server's own identity, from its --data-dir, as its port would serve.
    let own = switchboard::tls::ServerIdentity::load_or_create(data.path()).unwrap();
    assert_eq!(fingerprint, own.fingerprint());
    let pinned = switchboard::tls::ServerTrust::pinned(fingerprint);
    let wait = Duration::from_secs(10);
    let join = |addr: String, name: &str| {
        let mut client = switchboard::NetworkClient::connect_via(
            switchboard_hosting::JoinCodes::dialer().trust(pinned.clone()),
            addr,
            switchboard::ClientConfig::named(name),
        );
        support::wait_until("welcome", wait, || {
            client.poll();
            client.is_welcomed()
        });
        client
    };
    let mut ann = join(format!("{code}@{relay_addr}"), "ann");
    let mut bob = join(format!("ws://{ws}/{code}"), "bob");
    assert_eq!(
        support::ask(&mut ann, Board::Claim(0), wait),
        switchboard::RequestStatus::Accepted
    );
    assert_eq!(
        support::ask(&mut bob, Board::Claim(0), wait),
        switchboard::RequestStatus::Rejected("seat 0 is taken".into())
    );
    assert_eq!(
        support::ask(&mut bob, Board::Claim(1), wait),
        switchboard::RequestStatus::Accepted
    );
    for child in [&mut board, &mut relay] {
        signal(child, libc::SIGTERM);
        assert!(child.wait().unwrap().success());
    }
}
