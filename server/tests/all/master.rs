//! The master server with real processes: two game servers register, a
//! browser lists, filters and pings them, one stops and expires, the master
//! restarts and is repopulated, and floods and garbage are limited.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::{start, Proc};

use switchboard_master::{self as master, Filter, Listed};

const WAIT: Duration = Duration::from_secs(10);

fn start_master(port: u16, extra: &[&str]) -> (Proc, SocketAddr) {
    let port = port.to_string();
    let mut args = vec!["master", "--bind", "loopback", "--port", &port];
    args.extend_from_slice(extra);
    let (proc, port) = start(&args);
    (proc, SocketAddr::from(([127, 0, 0, 1], port)))
}

fn start_game(master: SocketAddr, name: &str, region: &str, tag: &str) -> (Proc, SocketAddr) {
    let master = master.to_string();
    let (proc, port) = start(&[
        "--port",
        "0",
        "--register-with",
        &master,
        "--name",
        name,
        "--region",
        region,
        "--tag",
        tag,
        "--heartbeat-secs",
        "0.2",
    ]);
    (proc, SocketAddr::from(([127, 0, 0, 1], port)))
}

async fn list(master: SocketAddr, filter: Filter) -> Vec<Listed> {
    master::fetch_list(master, filter, WAIT).await.unwrap()
}

async fn wait_for(master: SocketAddr, filter: Filter, count: usize) -> Vec<Listed> {
    let deadline = Instant::now() + WAIT;
    loop {
        let servers = list(master, filter.clone()).await;
        if servers.len() == count {
            return servers;
        }
        assert!(
            Instant::now() < deadline,
            "{} servers listed, waiting for {count}",
            servers.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_register_are_listed_filtered_pinged_expire_and_come_back_after_a_master_restart() {
    let (master_proc, master) = start_master(
        0,
        &["--expiry-secs", "1.5", "--heartbeats-per-minute", "600"],
    );
    let (_alpha, alpha) = start_game(master, "Alpha", "eu", "mode=coop");
    let (beta_proc, beta) = start_game(master, "Beta", "us", "mode=pvp");

    let all = wait_for(master, Filter::default(), 2).await;
    let addrs: Vec<SocketAddr> = all.iter().map(|l| l.addr).collect();
    assert!(
        addrs.contains(&alpha) && addrs.contains(&beta),
        "listed at their game addresses: {addrs:?}"
    );
    let eu = list(
        master,
        Filter {
            region: Some("eu".into()),
            ..Filter::default()
        },
    )
    .await;
    assert_eq!(
        eu.iter().map(|l| l.info.name.as_str()).collect::<Vec<_>>(),
        ["Alpha"]
    );
    let pvp = list(
        master,
        Filter {
            tags: vec![("mode".into(), "pvp".into())],
            ..Filter::default()
        },
    )
    .await;
    assert_eq!(
        pvp.iter().map(|l| l.info.name.as_str()).collect::<Vec<_>>(),
        ["Beta"]
    );
    assert_eq!(
        list(
            master,
            Filter {
                no_password: true,
                dedicated: Some(true),
                ..Filter::default()
            }
        )
        .await
        .len(),
        2
    );

    // The browser pings both and asks one for its info directly.
    let pinged = master::ping_servers(all, 8, Duration::from_millis(500), 2)
        .await
        .unwrap();
    assert!(pinged.iter().all(|b| b.ping.is_some()), "{pinged:?}");
    assert!(
        pinged.windows(2).all(|w| w[0].ping <= w[1].ping),
        "sorted by ping"
    );
    let info = master::query_info(alpha, WAIT).await.unwrap();
    assert_eq!((info.name.as_str(), info.region.as_str()), ("Alpha", "eu"));

    // Beta stops: it expires from the list.
    drop(beta_proc);
    let left = wait_for(master, Filter::default(), 1).await;
    assert_eq!(left[0].info.name, "Alpha");
    assert!(master::master_stats(master, WAIT).await.unwrap().expired >= 1);

    // The master restarts on the same port: the next heartbeats repopulate it.
    drop(master_proc);
    let (_master_again, again) = start_master(
        master.port(),
        &["--expiry-secs", "1.5", "--heartbeats-per-minute", "600"],
    );
    assert_eq!(again, master);
    let back = wait_for(master, Filter::default(), 1).await;
    assert_eq!(back[0].info.name, "Alpha");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_flood_from_one_address_is_limited_and_garbage_is_counted() {
    let (_master_proc, master) = start_master(0, &[]);
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let beat = master::protocol::heartbeat();
    // In bursts of 50, so that the kernel's receive buffer, not the master,
    // is not what stops most of them.
    for burst in 0..10 {
        for _ in 0..50 {
            udp.send_to(&beat, master).await.unwrap();
        }
        for junk in 0..10u32 {
            udp.send_to(&(burst * 10 + junk).to_le_bytes(), master)
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Count the info queries the flood drew: at most the burst of four.
    let mut queries = 0;
    let mut buf = [0u8; 2048];
    while let Ok(Ok((len, from))) =
        tokio::time::timeout(Duration::from_millis(500), udp.recv_from(&mut buf)).await
    {
        assert_eq!(from, master);
        if let Ok(master::protocol::Datagram::InfoQuery { .. }) =
            master::protocol::decode(&buf[..len])
        {
            queries += 1;
        }
    }
    assert!(
        queries <= 4,
        "{queries} queries answered a flood of 500 heartbeats"
    );
    // UDP: the kernel may drop some of a flood before the master reads it.
    let stats = master::master_stats(master, WAIT).await.unwrap();
    assert!(
        stats.heartbeats >= 100,
        "most of the flood arrived: {stats:?}"
    );
    assert!(
        stats.heartbeats - stats.rate_limited <= 4,
        "only the burst was answered: {stats:?}"
    );
    assert!((1..=100).contains(&stats.malformed), "{stats:?}");
    assert_eq!(stats.listed, 0, "nobody answered a challenge");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_master_processes_on_one_redis_list_the_same_servers_and_outlive_each_other() {
    let redis = switchboard_redis::testing::RedisProcess::start().unwrap();
    let url = redis.url();
    let shared = ["--redis", url.as_str(), "--expiry-secs", "30"];
    let (a_proc, a) = start_master(0, &shared);
    let (_b_proc, b) = start_master(0, &shared);
    // The game knows only the first master.
    let (_game, game) = start_game(a, "Solo", "eu", "mode=coop");
    let listed = wait_for(b, Filter::default(), 1).await;
    assert_eq!(
        (listed[0].addr, listed[0].info.name.as_str()),
        (game, "Solo")
    );
    // The first master dies; the second still lists the game from Redis.
    drop(a_proc);
    let listed = list(b, Filter::default()).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].addr, game);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_stopped_with_sigterm_leaves_the_list_at_once() {
    // A long expiry: only the goodbye can take the server off in time.
    let (_master_proc, master) = start_master(0, &["--expiry-secs", "120"]);
    let (game_proc, _) = start_game(master, "Gamma", "eu", "mode=coop");
    wait_for(master, Filter::default(), 1).await;
    let stopped = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &game_proc.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    while !list(master, Filter::default()).await.is_empty() {
        assert!(
            stopped.elapsed() < Duration::from_secs(3),
            "still listed {:?} after SIGTERM",
            stopped.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = stopped.elapsed();
    let stats = master::master_stats(master, WAIT).await.unwrap();
    assert_eq!(
        (stats.goodbyes, stats.expired),
        (1, 0),
        "said goodbye, did not expire"
    );
    eprintln!("delisted {took:?} after SIGTERM");
}

/// A board server bound to all addresses (so in TLS, with a fingerprint)
/// with `extra` arguments, listed on `master` every 0.2 s: the process, its
/// port, its fingerprint and its data directory (kept while the test runs).
fn start_listed_beyond_loopback(
    master: SocketAddr,
    extra: &[&str],
) -> (Proc, u16, switchboard::tls::Fingerprint, tempfile::TempDir) {
    let data = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new(support::BIN);
    command
        .args(["--bind", "all", "--port", "0", "--data-dir"])
        .arg(data.path())
        .args(extra)
        .args([
            "--register-with",
            &master.to_string(),
            "--heartbeat-secs",
            "0.2",
        ]);
    let (game, port, printed) = support::start_command_tls(command);
    (game, port, printed, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_beyond_loopback_lists_the_fingerprint_players_pin_it_by() {
    let (_master_proc, master) = start_master(0, &["--heartbeats-per-minute", "600"]);
    let (_game, _, printed, _data) = start_listed_beyond_loopback(master, &[]);
    let listed = wait_for(master, Filter::default(), 1).await;
    assert_eq!(
        listed[0].fingerprint(),
        Some(printed),
        "{:?}",
        listed[0].info.tags
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_server_says_which_transports_it_offers_and_a_player_joins_by_one() {
    let (_master_proc, master) = start_master(0, &["--heartbeats-per-minute", "600"]);
    let (_game, port, printed, _data) =
        start_listed_beyond_loopback(master, &["--ws-port", "0", "--quic-port", "0"]);
    let listed = wait_for(master, Filter::default(), 1).await;
    let offered = listed[0].transports();
    let names: Vec<_> = offered.iter().map(|o| o.transport.name()).collect();
    assert_eq!(
        names,
        ["tcp", "ws", "quic", "webtransport"],
        "{:?}",
        listed[0].info.tags
    );
    assert_eq!(offered[0].addr.port(), port);
    assert!(
        offered[..3].iter().all(|o| o.fingerprint == Some(printed)),
        "one identity pins them all: {offered:?}"
    );
    // Browsers: WebTransport on the QUIC port, trusted by the hashes of its
    // short-lived certificates, which a client checking them as a browser
    // does accepts.
    let web = &offered[3];
    assert_eq!(web.url(), format!("https://{}/", offered[2].addr));
    let hashes = listed[0].webtransport_hashes();
    assert_eq!(hashes.len(), 2);
    assert_eq!(web.fingerprint, Some(hashes[0]));
    let config = wtransport::ClientConfig::builder()
        .with_bind_default()
        .with_server_certificate_hashes(
            hashes
                .iter()
                .map(|h| wtransport::tls::Sha256Digest::new(h.0)),
        )
        .build();
    wtransport::Endpoint::client(config)
        .unwrap()
        .connect(web.url())
        .await
        .expect("a WebTransport session trusting the listed hashes");
    let quic = &offered[2];
    assert_eq!(quic.url(), format!("quic://{}", quic.addr));
    // A player dials what the listing says, pinning what it lists.
    let dialer = switchboard::socket::Dialer::default()
        .trust(switchboard::tls::ServerTrust::pinned(printed));
    let mut player = switchboard::NetworkClient::connect_via(
        dialer,
        quic.url(),
        switchboard::ClientConfig::named("lister"),
    );
    support::wait_until("welcomed over QUIC", Duration::from_secs(10), || {
        player.poll();
        player.is_welcomed()
    });
    assert!(player.server_addr().starts_with("quic://"));
}
