//! What the join-code relay adds: round trips (a typed request and its
//! verdict) and CPU per message, direct and through the relay, in one run.
//!
//! `cargo bench -p switchboard-hosting --bench rendezvous`
//! (`ROUNDS=20000` for more; 5,000 by default). Client, relay and host are in this process, so
//! the CPU figure is everything a message costs on this machine: the
//! relay's part is the difference between the two rows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard::prelude::*;
use switchboard_hosting::{HostConfig, HostLink, HostStatus, HostTarget, RendezvousServer};

channels! { enum Chan { Score = 16 } }
actions! { #[derive(Debug)] enum Score in Chan::Score { Add(u32) = 1, Total(u32) = 2 } }

/// Adds up; answers only the player who asked (a round trip is one verdict).
struct Points(u32);
impl GameLogic for Points {
    type Message = Score;
    type Command = u32;
    fn validate(&self, request: &Request<Score>) -> Result<u32, Rejection> {
        match request.message {
            Score::Add(n @ 1..=10) => Ok(n),
            _ => Err(Rejection::invalid("add 1 to 10 points")),
        }
    }
    fn apply(&mut self, _: ClientId, n: u32, _: &mut Outbox) {
        self.0 += n;
    }
}

/// CPU time of this process so far (user + system), from /proc.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of stat(5): 11 and 12 after ')'.
    let hz = 100; // USER_HZ on Linux
    Duration::from_millis((ticks(11) + ticks(12)) * 1000 / hz)
}

struct Row {
    p50: Duration,
    p99: Duration,
    cpu_per_round: Duration,
}

/// `rounds` round trips of a client joined at `addr`, one after another.
fn measure(addr: String, rounds: usize) -> Row {
    let mut client = NetworkClient::connect_via(
        switchboard_hosting::JoinCodes::dialer(),
        addr,
        ClientConfig::named("bench"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !client.is_welcomed() {
        assert!(Instant::now() < deadline, "not welcomed");
        client.poll_timeout(Duration::from_millis(5));
    }
    // Warm up.
    for _ in 0..100 {
        let ticket = client.request(Score::Add(1)).unwrap();
        let verdict = client.wait(ticket, Duration::from_secs(5));
        assert_eq!(verdict, RequestStatus::Accepted);
    }
    let mut times = Vec::with_capacity(rounds);
    let cpu_before = cpu();
    for _ in 0..rounds {
        let start = Instant::now();
        let ticket = client.request(Score::Add(1)).unwrap();
        let verdict = client.wait(ticket, Duration::from_secs(5));
        assert_eq!(verdict, RequestStatus::Accepted);
        times.push(start.elapsed());
    }
    let cpu_spent = cpu() - cpu_before;
    times.sort();
    Row {
        p50: times[rounds / 2],
        p99: times[rounds * 99 / 100],
        cpu_per_round: cpu_spent / rounds as u32,
    }
}

fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut config = ManagerConfig::default();
    config.rules.message_rate.per_second = 100_000.0;
    config.rules.message_rate.burst = 100_000.0;
    let server = ServerManager::builder(Points(0))
        .config(config)
        .spawn()
        .unwrap();
    let handle = server.handle();
    let (relay, _link, code) = runtime.block_on(async move {
        let relay = RendezvousServer::builder().spawn().unwrap();
        let attach = move |stream, addr| handle.attach(stream, addr).is_some();
        let config = HostConfig::new(relay.local_addr().to_string());
        let mut link = HostLink::start(config, HostTarget::Attach(Arc::new(attach)));
        let HostStatus::Ready { code, .. } = link.ready().await else {
            panic!("no code")
        };
        (relay, link, code)
    });
    let direct = measure(server.local_addr().to_string(), rounds);
    let relayed = measure(format!("{code}@{}", relay.local_addr()), rounds);
    println!("rendezvous: {rounds} round trips (typed request and verdict), one after another");
    println!("| path | p50 | p99 | CPU per round trip (whole process) |");
    println!("|---|---|---|---|");
    for (name, row) in [("direct", &direct), ("through the relay", &relayed)] {
        println!(
            "| {name} | {:.0} µs | {:.0} µs | {:.1} µs |",
            row.p50.as_secs_f64() * 1e6,
            row.p99.as_secs_f64() * 1e6,
            row.cpu_per_round.as_secs_f64() * 1e6
        );
    }
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    println!(
        "relay / direct: p50 {:.2}x, CPU {:.2}x (the relay's own CPU: {:.1} µs a round trip, two frames)",
        ratio(relayed.p50, direct.p50),
        ratio(relayed.cpu_per_round, direct.cpu_per_round),
        (relayed.cpu_per_round.as_secs_f64() - direct.cpu_per_round.as_secs_f64()) * 1e6
    );
    let stats = relay.stats();
    println!(
        "relay: {} bytes piped, {} players",
        stats.bytes, stats.joined
    );
}
