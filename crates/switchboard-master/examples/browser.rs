//! A server browser: ask a master server for the list, ping every server,
//! show them fastest first, and join one.
//!
//! ```text
//! cargo run -p switchboard-master --example browser                                   # demo: a master and three servers in this process
//! cargo run -p switchboard-master --example browser -- --master 127.0.0.1:27900       # browse a running master
//! cargo run -p switchboard-master --example browser -- --master 127.0.0.1:27900 --region eu --not-full --join 0
//! ```
//!
//! Start a master with `cargo run -p switchboard-server -- master`, and game
//! servers that register with it with
//! `cargo run -p switchboard-server -- --port 0 --register-with 127.0.0.1:27900 --name Alpha`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use switchboard::{
    ClientConfig, ClientId, GameLogic, ManagerConfig, NetworkClient, Outbox, Rejection, Request,
    ServerManager,
};
use switchboard_master::{
    self as master, Announce, Filter, MasterConfig, MasterServer, ServerInfo,
};

/// The demo's game servers: they admit players and refuse every request.
struct DemoGame;

impl GameLogic for DemoGame {
    type Message = switchboard::Message;
    type Command = ();
    fn validate(&self, _: &Request) -> Result<(), Rejection> {
        Err(Rejection::invalid("this is a demo server"))
    }
    fn apply(&mut self, _: ClientId, _: (), _: &mut Outbox) {}
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let filter = Filter {
        region: value("--region"),
        game_type: value("--game"),
        not_full: args.iter().any(|a| a == "--not-full"),
        no_password: args.iter().any(|a| a == "--no-password"),
        ..Filter::default()
    };
    // Without --master: a master and three game servers in this process.
    let expect = if value("--master").is_some() { 1 } else { 3 };
    let (master, _demo) = match value("--master") {
        Some(addr) => (addr.parse::<SocketAddr>()?, None),
        None => {
            let demo = demo()?;
            (demo.0.local_addr(), Some(demo))
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (listed, pinged) = runtime.block_on(async {
        // Servers are listed once their first heartbeat was answered: give
        // them a moment.
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut listed = master::fetch_list(master, filter.clone(), Duration::from_secs(5)).await?;
        while listed.len() < expect && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            listed = master::fetch_list(master, filter.clone(), Duration::from_secs(5)).await?;
        }
        let pinged =
            master::ping_servers(listed.clone(), 16, Duration::from_millis(500), 2).await?;
        Ok::<_, std::io::Error>((listed.len(), pinged))
    })?;
    println!("{listed} servers listed by {master}");
    println!(
        "  #  {:<24} {:<10} {:<8} {:>7} {:>9}  {:<11} address",
        "name", "game", "region", "players", "ping", "protocol"
    );
    for (i, server) in pinged.iter().enumerate() {
        let info = &server.listed.info;
        let ping = server.ping.map_or("-".to_string(), |p| {
            format!("{:.2} ms", p.as_secs_f64() * 1000.0)
        });
        println!(
            "{i:>3}  {:<24} {:<10} {:<8} {:>3}/{:<3} {:>9}  {:<11} {}",
            info.name,
            info.game_type,
            info.region,
            info.players,
            info.max_players,
            ping,
            protocol(info),
            server.listed.join_addr()
        );
    }
    if let Some(choice) = value("--join").or_else(|| {
        if args.is_empty() {
            Some("0".into())
        } else {
            None
        }
    }) {
        let server = pinged
            .get(choice.parse::<usize>()?)
            .ok_or("no such server in the list")?;
        if protocol(&server.listed.info) == "torque" {
            println!(
                "{} is a Torque game's server: join it from the game",
                server.listed.addr
            );
            return Ok(());
        }
        let name = value("--name").unwrap_or_else(|| "browser".into());
        // A game hosted through a join-code relay is joined by its code.
        let mut client = NetworkClient::connect_via(
            switchboard_hosting::JoinCodes::dialer(),
            server.listed.join_addr(),
            ClientConfig::named(&name),
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while !client.is_welcomed() && !client.is_finished() && Instant::now() < deadline {
            client.poll_timeout(Duration::from_millis(20));
        }
        match client.client_id() {
            Some(id) => println!("joined {} as {name} ({id})", server.listed.info.name),
            None => println!("could not join {}", server.listed.info.name),
        }
        client.close("just looking");
        client.poll_timeout(Duration::from_millis(50));
    }
    Ok(())
}

/// Which protocol a listed server speaks: its `protocol` tag (`torque`
/// for a Torque game's, listed through the master's Torque port), else
/// Switchboard's.
fn protocol(info: &master::ServerInfo) -> &str {
    info.tags
        .iter()
        .find(|(k, _)| k == "protocol")
        .map_or("switchboard", |(_, v)| v.as_str())
}

/// A master and three game servers registered with it, all in this process
/// (each stops when dropped: they are kept until the end).
type Demo = (
    master::RunningMaster,
    Vec<switchboard::RunningServer<DemoGame>>,
);

fn demo() -> Result<Demo, Box<dyn std::error::Error>> {
    // All three servers share this machine's IP: allow their heartbeats.
    let config = MasterConfig {
        heartbeats_per_minute: 600.0,
        heartbeat_burst: 10.0,
        ..MasterConfig::default()
    };
    let master = MasterServer::builder().config(config).spawn()?;
    let addr = master.local_addr();
    let mut servers = Vec::new();
    for (name, region, max) in [("Alpha", "eu", 8), ("Beta", "us", 4), ("Gamma", "eu", 16)] {
        let info = ServerInfo {
            name: name.into(),
            game_type: "board".into(),
            region: region.into(),
            max_players: max,
            dedicated: true,
            version: env!("CARGO_PKG_VERSION").into(),
            ..ServerInfo::default()
        };
        let mut announce = Announce::new(vec![addr], info);
        announce.heartbeat_interval = Duration::from_millis(200);
        let config = ManagerConfig {
            listing: Some(announce.hook()),
            ..ManagerConfig::default()
        };
        servers.push(ServerManager::builder(DemoGame).config(config).spawn()?);
    }
    Ok((master, servers))
}
