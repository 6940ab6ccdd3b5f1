//! The fourth audit's master attacks, measured the same way before and
//! after (issue 48): the work of one list request, servers kept listed
//! under forged and honest heartbeats (the amplification of Torque requests
//! from a forged source is measured in `switchboard-torque`). Uses only the master's public API, so that the
//! same file runs against an older checkout for the "before" column.
//!
//! Run: `cargo test --release -p switchboard-master --test all limits::audit_figures -- --ignored --nocapture`

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use switchboard_master::protocol::{self, Datagram};
use switchboard_master::{
    Filter, ListRequest, Master, MasterConfig, MemoryRegistry, Registry, ServerInfo,
};

fn info(tags: usize) -> ServerInfo {
    ServerInfo {
        name: "server".into(),
        max_players: 8,
        tags: (0..tags)
            .map(|i| (format!("k{i}"), "v".to_string()))
            .collect(),
        ..ServerInfo::default()
    }
}

fn server(i: u32) -> SocketAddr {
    SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], 7000))
}

/// The time the work took: each figure runs alone on the test's one thread
/// (tokio's current-thread runtime), so this is its CPU time.
fn clock() -> Instant {
    Instant::now()
}

#[tokio::test]
#[ignore = "figures for docs/SECURITY.md; run with --ignored --nocapture"]
async fn figures_list_request_cost() {
    let t0 = Instant::now();
    let mut registry = MemoryRegistry::default();
    let limits = switchboard_master::Limits {
        max_servers: 10_000,
        max_servers_per_address: 10_000,
        expiry: Duration::from_secs(20),
        grace: Duration::ZERO,
    };
    for i in 0..10_000 {
        registry
            .upsert(server(i), info(4), t0, limits)
            .await
            .unwrap();
    }
    // The audit's request: ~2,000 copies of one tag (4 KiB).
    let hostile = ListRequest {
        filter: Filter {
            tags: vec![("k0".into(), "v".into()); 2000],
            ..Filter::default()
        },
        page: 0,
        page_size: 100,
    };
    // Every check a request passes on its way (the frame's own limit is
    // the listener's), then the registry's page.
    let cpu = clock();
    let refused = hostile_refused(&hostile);
    let page = if refused {
        None
    } else {
        Some(registry.query(&hostile).await.unwrap())
    };
    let hostile_cpu = cpu.elapsed();
    // An honest page: page 50 of everything.
    let honest = ListRequest {
        filter: Filter::default(),
        page: 50,
        page_size: 100,
    };
    let cpu = clock();
    let rounds = 50;
    for _ in 0..rounds {
        registry.query(&honest).await.unwrap();
    }
    let honest_cpu = (cpu.elapsed()) / rounds;
    println!(
        "FIGURE list: 10,000 servers; 2,000-tag filter: {:.3} ms CPU ({}); a page of 100: {:.3} ms CPU",
        hostile_cpu.as_secs_f64() * 1e3,
        if refused { "refused before matching".to_string() } else { format!("{} matched", page.map_or(0, |p| p.total)) },
        honest_cpu.as_secs_f64() * 1e3,
    );
}

/// Whether the master refuses the filter before matching (the check this
/// issue added; absent before it, where the answer is false).
fn hostile_refused(request: &ListRequest) -> bool {
    // Serialized and checked as the master's TCP side does (the filter's
    // own check when it has one).
    filter_check(&request.filter)
}

fn filter_check(filter: &Filter) -> bool {
    filter.check().is_err()
}

#[tokio::test]
#[ignore = "figures for docs/SECURITY.md; run with --ignored --nocapture"]
async fn figures_heartbeats() {
    async fn register(master: &mut Master<MemoryRegistry>, from: SocketAddr, at: Instant) {
        if let Some((_, query)) = master.on_datagram(from, &protocol::heartbeat(), at).await {
            if let Ok(Datagram::InfoQuery { challenge, .. }) = protocol::decode(&query) {
                let reply = protocol::encode(&Datagram::InfoReply {
                    challenge,
                    info: info(0),
                });
                master.on_datagram(from, &reply, at).await;
            }
        }
    }
    // 16 honest servers on one IP, a heartbeat each every 5 s, 2 minutes.
    let t0 = Instant::now();
    let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
    let box_server = |port: u16| SocketAddr::from(([198, 51, 100, 1], 27000 + port));
    let mut at = t0;
    while at < t0 + Duration::from_secs(120) {
        for port in 0..16 {
            register(&mut master, box_server(port), at).await;
        }
        at += Duration::from_secs(5);
        master.tick(at).await;
    }
    let honest = master.stats().listed;
    // One server, and heartbeats forged from its IP (another port), ten a
    // second, for a minute; the server's own every 5 s.
    let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
    let victim = SocketAddr::from(([198, 51, 100, 2], 27000));
    let forged = SocketAddr::from(([198, 51, 100, 2], 40000));
    register(&mut master, victim, t0).await;
    let mut at = t0;
    while at < t0 + Duration::from_secs(60) {
        at += Duration::from_millis(100);
        master.on_datagram(forged, &protocol::heartbeat(), at).await;
        if (at - t0).as_millis() % 5000 == 0 {
            register(&mut master, victim, at).await;
        }
        master.tick(at).await;
    }
    let victim_listed = master.stats().listed;
    println!(
        "FIGURE heartbeats: 16 honest servers on one IP at 5 s: {honest} of 16 listed after 2 min; a server under heartbeats forged from its IP (10/s): {victim_listed} of 1 listed after 1 min"
    );
}
