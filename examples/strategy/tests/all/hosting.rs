//! Hosting for players on the internet: `--host --bind all` asks the home
//! router to forward the game's port (the hosting crate's fake UPnP gateway
//! on loopback), and `--host --rendezvous` takes players through a
//! join-code relay (a real one, in this process).

#[path = "../../../../crates/switchboard-hosting/tests/hosting/fake_upnp.rs"]
#[allow(dead_code)]
mod fake_upnp;
use crate::player;
use crate::proxy;
use crate::scratch;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_strategy");

/// The game's binary as a host named ann in the typed interface, with
/// `args` and its saves in `saves`; its stdout, line by line.
fn host(
    args: &[String],
    saves: &scratch::Scratch,
) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = Command::new(BIN)
        .args(["--host", "--name", "ann", "--text"])
        .args(args)
        .arg("--saves")
        .arg(&**saves)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = crate::process::stdout_lines(&mut child);
    (child, lines)
}

/// Owned arguments.
fn args(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

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
    let search = igd.search.to_string();
    // A bot that waits in the lobby for a second player; no PCP or NAT-PMP
    // on this "router" (refused at once), then UPnP.
    let (mut host, lines) = host(
        &args(&[
            "--bind",
            "all",
            "--bot",
            "1",
            "--players",
            "2",
            "--gateway",
            "127.0.55.1",
            "--upnp-search",
            &search,
        ]),
        &saves,
    );
    let started = line_with(&lines, "on port ");
    let port: u16 = started.rsplit(' ').next().unwrap().parse().unwrap();
    let mapped = line_with(&lines, "port mapping");
    assert_eq!(
        mapped,
        format!("* port mapping (game port {port}): reachable at 203.0.113.9:{port} through UPnP")
    );
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(host.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    // Said on stdout as the process ends (and maybe in the game's log
    // before, if the game loop ran in between).
    let removed = line_with(&lines, "was removed");
    assert!(
        removed.ends_with(&format!(
            "the UPnP mapping of 203.0.113.9:{port} was removed"
        )),
        "{removed}"
    );
    assert_eq!(host.wait().unwrap().code(), Some(130));
    assert_eq!(
        igd.seen().last(),
        Some(&fake_upnp::Seen::Delete {
            external_port: port
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_host_and_two_players_one_over_websocket_one_cut_and_back() {
    use player::Player;
    use strategy::protocol::{GameAct, LobbyAct};
    use strategy::scenario::NationId;
    use switchboard::RequestStatus;
    use switchboard_hosting::RendezvousServer;

    let relay = RendezvousServer::builder()
        .websocket_port(0)
        .spawn()
        .unwrap();
    let saves = scratch::Scratch::new("hosting-relay");
    // The host: the game's own binary, its server a child process, linked
    // to the relay; a bot that starts the game once three are ready.
    let to = relay.local_addr().to_string();
    let (mut host, lines) = host(
        &args(&[
            "--scenario",
            "islands",
            "--bot",
            "3",
            "--players",
            "3",
            "--rendezvous",
            &to,
        ]),
        &saves,
    );
    let news = line_with(&lines, "join-code relay: join code ");
    let code = news
        .split_whitespace()
        .skip_while(|w| *w != "code")
        .nth(1)
        .unwrap()
        .trim_end_matches(':')
        .to_string();
    assert!(
        news.contains(&format!("--join {code}@{} --trust ", relay.local_addr())),
        "{news}"
    );
    // Bob over TCP through a line that will drop, cat over WebSocket.
    let line = proxy::Proxy::start(relay.local_addr());
    let mut bob = Player::join(format!("{code}@{}", line.addr), "bob");
    let ws = relay.websocket_addr().unwrap();
    let mut cat = Player::join(format!("ws://{ws}/{code}"), "cat");
    for (player, nation) in [(&mut bob, 1u8), (&mut cat, 2)] {
        let pick = player.ask(LobbyAct::Pick(NationId(nation)));
        assert_eq!(pick, RequestStatus::Accepted);
        assert_eq!(player.ask(LobbyAct::Ready(true)), RequestStatus::Accepted);
    }
    for (player, nation) in [(&mut bob, 1u8), (&mut cat, 2)] {
        player.until_playing(nation);
    }
    let id = bob.client.client_id();
    line.cut();
    bob.until(|p| !p.client.is_welcomed());
    bob.until(|p| p.client.is_welcomed());
    assert_eq!(bob.client.client_id(), id);
    bob.until_playing(1);
    let unit = bob.unit_of(1);
    assert_eq!(bob.ask(GameAct::Claim(unit)), RequestStatus::Accepted);
    assert_eq!(cat.view().you, Some(NationId(2)));
    let stats = relay.stats();
    assert_eq!((stats.codes, stats.joined), (1, 3), "{stats:?}");
    let _ = host.kill();
    let _ = host.wait();
}

/// Hosts with `--bind all --master M --rendezvous R` behind the fake router
/// `igd`, on `port`; the host's decision line, and its other lines.
fn decision(
    igd: &fake_upnp::FakeIgd,
    master: SocketAddr,
    relay: SocketAddr,
    port: u16,
) -> (String, Vec<String>) {
    let saves = scratch::Scratch::new(&format!("hosting-decision-{port}"));
    let (port, master, relay) = (port.to_string(), master.to_string(), relay.to_string());
    let search = igd.search.to_string();
    let (mut host, lines) = host(
        &args(&[
            "--bind",
            "all",
            "--bot",
            "1",
            "--players",
            "2",
            "--port",
            &port,
            "--master",
            &master,
            "--rendezvous",
            &relay,
            "--gateway",
            "127.0.55.2",
            "--upnp-search",
            &search,
        ]),
        &saves,
    );
    let decided = line_with(&lines, "players on the internet: ");
    // What else it said by then, and shortly after.
    std::thread::sleep(Duration::from_millis(300));
    let rest: Vec<String> = lines.try_iter().collect();
    let _ = host.kill();
    let _ = host.wait();
    (decided, rest)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upnp_host_checked_by_its_master_plays_direct_and_falls_back_on_the_relay_when_unreachable()
{
    use switchboard_hosting::RendezvousServer;
    use switchboard_master::MasterServer;
    let master = MasterServer::builder().spawn().unwrap();
    let at = master.local_addr();
    let relay = RendezvousServer::builder().spawn().unwrap();
    let to = relay.local_addr();
    // The router forwards the game's own port: the master connects back.
    let igd = fake_upnp::FakeIgd::start(fake_upnp::Behaviour::default()).await;
    let port = free_port();
    let (decided, rest) = tokio::task::spawn_blocking(move || decision(&igd, at, to, port))
        .await
        .unwrap();
    assert_eq!(
        decided,
        format!("* players on the internet: they join at 203.0.113.9:{port} (direct: the master at {at} connected back to it)")
    );
    assert!(!rest.iter().any(|l| l.contains("join code")), "{rest:?}");
    assert_eq!(relay.stats().codes, 0);
    // The router gives another port, where nothing listens: the relay.
    let port = free_port();
    let behaviour = fake_upnp::Behaviour {
        taken: vec![port],
        ..Default::default()
    };
    let igd = fake_upnp::FakeIgd::start(behaviour).await;
    let (decided, rest) = tokio::task::spawn_blocking(move || decision(&igd, at, to, port))
        .await
        .unwrap();
    let unreachable = format!(
        "the master at {at} could not reach 127.0.0.1:{}: refused",
        port + 1
    );
    assert!(
        decided.starts_with(&format!(
            "* players on the internet: they join through the relay at {to}"
        )),
        "{decided}"
    );
    assert!(decided.contains(&unreachable), "{decided}");
    assert!(
        rest.iter()
            .any(|l| l.contains("join-code relay: join code ")),
        "{rest:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_of_a_hosted_game_is_in_its_listing_and_a_browser_joins_with_it() {
    use switchboard_hosting::RendezvousServer;
    use switchboard_master::{fetch_list, Filter, MasterServer};
    let master = MasterServer::builder().spawn().unwrap();
    let relay = RendezvousServer::builder().spawn().unwrap();
    let saves = scratch::Scratch::new("hosting-listed-code");
    // Hosted on loopback only: the relay is its only way in.
    let (master_at, relay_at) = (
        master.local_addr().to_string(),
        relay.local_addr().to_string(),
    );
    let (mut host, lines) = host(
        &args(&[
            "--bot",
            "1",
            "--players",
            "2",
            "--master",
            &master_at,
            "--rendezvous",
            &relay_at,
        ]),
        &saves,
    );
    let news = line_with(&lines, "join-code relay: join code ");
    let code = news
        .split("join code ")
        .nth(1)
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .to_string();
    let expected = format!("{code}@{}", relay.local_addr());
    // The listing shows the code from the child's next heartbeat on.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let listed = loop {
        let listed = fetch_list(
            master.local_addr(),
            Filter::default(),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        if listed.iter().any(|l| l.join_addr() == expected) || std::time::Instant::now() > deadline
        {
            break listed;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let game = listed
        .iter()
        .find(|l| l.info.name == "ann")
        .expect("listed");
    assert_eq!(game.join_addr(), expected, "{listed:?}");
    // A browser joins where the listing says.
    let joined = tokio::task::spawn_blocking({
        let addr = game.join_addr();
        move || {
            let player = player::Player::join(addr, "bob");
            player.client.client_id()
        }
    })
    .await
    .unwrap();
    assert!(joined.is_some());
    assert_eq!(relay.stats().joined, 1);
    let _ = host.kill();
    let _ = host.wait();
}
