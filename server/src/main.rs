//! `switchboard-server`: the dedicated Switchboard server, and the master
//! server that lists game servers.
//!
//! As a game server it runs the built-in board game
//! ([`switchboard::board::BoardLogic`]): a shared board of keys and values,
//! seats, chat and whispers, usable by any Switchboard client without game
//! code. It prints a ready line (`SWITCHBOARD READY <protocol> <port>`) once
//! it listens, and shuts down cleanly on Ctrl-C or SIGTERM. Started by
//! `LocalServer` (environment `SWITCHBOARD_CHILD=1`) it also stops when its
//! stdin closes. `--register-with` lists it on master servers.
//!
//! `switchboard-server master` runs a master server instead (UDP and TCP,
//! default port 27900).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use switchboard::socket::BindScope;
use switchboard::ManagerConfig;
use switchboard_master::{self as master, Announce, MasterConfig, MasterServer, ServerInfo};
use switchboard_server::board::BoardLogic;

/// The dedicated Switchboard game server.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    game: GameArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a master server that lists game servers.
    Master(MasterArgs),
    /// Run a real-time relay (transforms relayed within zones).
    Relay(RelayArgs),
    /// Load-test a relay with bots, and report.
    Bots(BotsArgs),
}

#[derive(Debug, Args)]
struct RelayArgs {
    /// `loopback` or `all`.
    #[arg(long, default_value = "all", value_parser = parse_scope)]
    bind: BindScope,
    /// The native (Switchboard) port.
    #[arg(long, default_value_t = 7200)]
    port: u16,
    /// Also listen for newline-delimited JSON clients on this port.
    #[arg(long)]
    json_port: Option<u16>,
    /// The longest, in milliseconds, a relayed message waits to share a
    /// write when the relay is busy (0: never waits); a quiet relay writes
    /// at once.
    #[arg(long, default_value_t = 10)]
    send_interval_ms: u64,
    /// Deliveries a second under which every delivery is written at once.
    #[arg(long, default_value_t = 100_000)]
    quiet_rate: u32,
}

#[derive(Debug, Args)]
struct BotsArgs {
    /// The relay's native address.
    #[arg(long, default_value = "127.0.0.1:7200")]
    addr: SocketAddr,
    /// Bots.
    #[arg(long, default_value_t = 100)]
    count: usize,
    /// Transforms per second per bot (0: idle connections, to measure memory).
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// Bots per zone.
    #[arg(long, default_value_t = 20)]
    zone_size: usize,
    /// Seconds of sending.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// The relay's process id, to report its CPU and memory (same machine).
    #[arg(long)]
    server_pid: Option<u32>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct GameArgs {
    /// Who may connect: `loopback` (this machine only) or `all` (every
    /// interface).
    #[arg(long, default_value = "loopback", value_parser = parse_scope)]
    bind: BindScope,
    /// The port to listen on; 0 picks a free one (printed in the ready line).
    #[arg(long, default_value_t = 7000)]
    port: u16,
    /// A password clients must give to join. Prefer `--password-file` or the
    /// SWITCHBOARD_PASSWORD variable: a command line is visible to every
    /// user of the machine.
    #[arg(long, env = "SWITCHBOARD_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// A file whose first line is the join password.
    #[arg(long, value_name = "PATH", conflicts_with = "password")]
    password_file: Option<std::path::PathBuf>,
    /// Seconds a disconnected client keeps its session for a reconnect.
    #[arg(long, default_value_t = 60)]
    grace_secs: u64,
    /// Sessions held at once.
    #[arg(long, default_value_t = 1024)]
    max_sessions: usize,
    /// Seats on the board.
    #[arg(long, default_value_t = 8)]
    seats: u8,
    /// Stop when stdin closes (what a parent process uses to stop its child).
    #[arg(long)]
    watch_stdin: bool,
    /// A master server to be listed on (repeat for several).
    #[arg(long = "register-with", value_name = "ADDR")]
    masters: Vec<SocketAddr>,
    /// The name shown in server browsers.
    #[arg(long, default_value = "Switchboard server")]
    name: String,
    /// The region shown in server browsers.
    #[arg(long, default_value = "")]
    region: String,
    /// A key=value tag shown in server browsers (repeat for several).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    tags: Vec<(String, String)>,
    /// Seconds between heartbeats to the masters.
    #[arg(long, default_value_t = 60.0)]
    heartbeat_secs: f64,
}

#[derive(Debug, Args)]
struct MasterArgs {
    /// `loopback` or `all`.
    #[arg(long, default_value = "all", value_parser = parse_scope)]
    bind: BindScope,
    /// UDP and TCP port.
    #[arg(long, default_value_t = master::DEFAULT_PORT)]
    port: u16,
    /// Seconds after which a silent server is dropped.
    #[arg(long, default_value_t = 180.0)]
    expiry_secs: f64,
    /// Servers listed at most.
    #[arg(long, default_value_t = 10_000)]
    max_servers: usize,
    /// Servers listed per IP at most.
    #[arg(long, default_value_t = 32)]
    max_per_ip: usize,
    /// Heartbeats per minute answered per IP.
    #[arg(long, default_value_t = 6.0)]
    heartbeats_per_minute: f64,
}

fn parse_scope(text: &str) -> Result<BindScope, String> {
    match text {
        "loopback" | "127.0.0.1" | "localhost" => Ok(BindScope::Loopback),
        "all" | "0.0.0.0" => Ok(BindScope::AllInterfaces),
        other => Err(format!("{other}: expected `loopback` or `all`")),
    }
}

fn parse_tag(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{text}: expected KEY=VALUE"))
}

fn main() -> ExitCode {
    // Started by LocalServer: configuration comes from the environment.
    switchboard::process::serve_if_child(BoardLogic::default);

    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Master(args)) => run_master(args),
        Some(Command::Relay(args)) => run_relay(args),
        Some(Command::Bots(args)) => run_bots(args),
        None => run_game(cli.game),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("switchboard-server: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run_game(args: GameArgs) -> Result<(), String> {
    switchboard::process::init_stderr_logging();
    let password = match &args.password_file {
        Some(path) => Some(read_password(path)?),
        None => {
            if std::env::args().any(|a| a == "--password" || a.starts_with("--password=")) {
                tracing::warn!(
                    "the password on the command line is visible to every user of this machine; use --password-file or SWITCHBOARD_PASSWORD"
                );
            }
            args.password.clone()
        }
    };
    let mut config = ManagerConfig {
        password: password.filter(|p| !p.is_empty()),
        ..ManagerConfig::default()
    };
    config.sessions.grace_period = Duration::from_secs(args.grace_secs);
    config.sessions.max_sessions = args.max_sessions;
    if !args.masters.is_empty() {
        let info = ServerInfo {
            name: args.name,
            game_type: "board".into(),
            scenario: format!("{} seats", args.seats),
            password: config.password.is_some(),
            dedicated: true,
            version: env!("CARGO_PKG_VERSION").into(),
            region: args.region,
            tags: args.tags,
            ..ServerInfo::default()
        };
        info.check().map_err(|e| format!("server info: {e}"))?;
        let mut announce = Announce::new(args.masters, info);
        announce.heartbeat_interval = Duration::from_secs_f64(args.heartbeat_secs.max(0.05));
        config.listing = Some(announce.hook());
    }
    let logic = BoardLogic::new(args.seats.max(1));
    switchboard::process::run_server(args.bind, args.port, config, logic, args.watch_stdin)
        .map_err(|e| e.to_string())
}

/// The first line of a password file, without its line ending.
fn read_password(path: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the password file {}: {e}", path.display()))?;
    Ok(text.lines().next().unwrap_or("").to_string())
}

fn run_master(args: MasterArgs) -> Result<(), String> {
    let config = MasterConfig {
        expiry: Duration::from_secs_f64(args.expiry_secs.max(0.1)),
        max_servers: args.max_servers,
        max_servers_per_ip: args.max_per_ip,
        heartbeats_per_minute: args.heartbeats_per_minute,
        tick_interval: Duration::from_secs_f64((args.expiry_secs / 10.0).clamp(0.05, 1.0)),
        ..MasterConfig::default()
    };
    let ip = match args.bind {
        BindScope::Loopback => IpAddr::V4(Ipv4Addr::LOCALHOST),
        _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    switchboard::process::init_stderr_logging();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let (server, handle) = MasterServer::bind(SocketAddr::new(ip, args.port), config)
            .await
            .map_err(|e| format!("cannot bind the master: {e}"))?;
        println!(
            "{}",
            switchboard::process::ready_line(handle.local_addr().port())
        );
        server.run(switchboard::process::wait_for_signal()).await;
        Ok(())
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

fn run_relay(args: RelayArgs) -> Result<(), String> {
    switchboard::process::init_stderr_logging();
    let runtime = runtime()?;
    runtime.block_on(async move {
        let mut config = switchboard_relay::RelayConfig {
            json_port: args.json_port,
            send_interval: std::time::Duration::from_millis(args.send_interval_ms),
            quiet_deliveries_per_second: args.quiet_rate,
            ..Default::default()
        };
        // Many players arrive at once (a load test, a server restart).
        config.server.max_pending_handshakes = 1024;
        config.server.max_connections = 20_000;
        let relay = switchboard_relay::RelayServer::spawn(args.bind, args.port, config)
            .map_err(|e| format!("cannot bind the relay: {e}"))?;
        println!(
            "{}",
            switchboard::process::ready_line(relay.native_addr().port())
        );
        if let Some(json) = relay.json_addr() {
            println!("JSON clients: {json}");
        }
        switchboard::process::wait_for_signal().await;
        relay.shutdown();
        Ok(())
    })
}

/// Raises the open-file limit to its hard maximum; returns the limit in force.
fn raise_file_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur;
            }
        }
        limit.rlim_cur
    }
}

/// CPU seconds (user + system) and resident KiB of a process.
fn process_usage(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((ticks / hz.max(1.0), rss))
}

fn run_bots(args: BotsArgs) -> Result<(), String> {
    switchboard::process::init_stderr_logging();
    let limit = raise_file_limit();
    let mut count = args.count;
    if count as u64 + 64 > limit {
        count = limit.saturating_sub(64) as usize;
        eprintln!("the open-file limit ({limit}) caps this test at {count} bots");
    }
    let runtime = runtime()?;
    let config = switchboard_relay::load::LoadConfig {
        addr: args.addr,
        bots: count,
        rate: args.rate,
        zone_size: args.zone_size,
        duration: Duration::from_secs_f64(args.seconds),
    };
    let total = args.seconds;
    // CPU is measured over the sending window only (not connecting, not
    // the drain at the end): one sample a second after sending starts, the
    // last one before it ends.
    let sample = || {
        let server = args.server_pid.and_then(process_usage);
        let own = process_usage(std::process::id());
        (std::time::Instant::now(), server, own)
    };
    let mut first = None;
    let mut last = None;
    let rss_before = args.server_pid.and_then(process_usage).map(|(_, rss)| rss);
    let report = runtime.block_on(switchboard_relay::load::run(
        config,
        |elapsed, sent, received| {
            let done = (elapsed.as_secs_f64() / total).clamp(0.0, 1.0);
            let bar: String = (0..30)
                .map(|i| if (i as f64) < done * 30.0 { '#' } else { '.' })
                .collect();
            eprint!(
                "\r[{bar}] {:>5.1}s sent {sent} received {received}   ",
                elapsed.as_secs_f64()
            );
            if elapsed.as_secs_f64() >= 0.5 && elapsed.as_secs_f64() <= total {
                if first.is_none() {
                    first = Some(sample());
                } else {
                    last = Some(sample());
                }
            }
        },
    ));
    eprintln!();
    let percent = |cpu0: f64, cpu1: f64, wall: f64| 100.0 * (cpu1 - cpu0) / wall.max(1e-9);
    let (mut server, mut bots_cpu) = (None, None);
    if let (Some((t0, server0, own0)), Some((t1, server1, own1))) = (first, last) {
        let wall = t1.duration_since(t0).as_secs_f64();
        if let (Some((cpu0, _)), Some((cpu1, rss))) = (server0, server1) {
            server = Some((percent(cpu0, cpu1, wall), rss));
        }
        if let (Some((cpu0, _)), Some((cpu1, _))) = (own0, own1) {
            bots_cpu = Some(percent(cpu0, cpu1, wall));
        }
    }
    // What the relay's resident memory grew by, per connected bot.
    let per_connection = match (rss_before, server) {
        (Some(before), Some((_, after))) if report.bots_connected > 0 => {
            Some(after.saturating_sub(before) as f64 * 1024.0 / report.bots_connected as f64)
        }
        _ => None,
    };
    if args.json {
        let mut value = serde_json::to_value(&report).map_err(|e| e.to_string())?;
        if let Some(bytes) = per_connection {
            value["server_bytes_per_connection"] = bytes.into();
        }
        if let Some((cpu, rss)) = server {
            value["server_cpu_percent"] = cpu.into();
            value["server_rss_kib"] = rss.into();
        }
        if let Some(cpu) = bots_cpu {
            value["bots_cpu_percent"] = cpu.into();
        }
        println!("{value}");
    } else {
        println!("bots connected     {} of {count}", report.bots_connected);
        println!(
            "sent               {} ({:.0}/s)",
            report.sent, report.sent_per_second
        );
        println!(
            "received           {} ({:.0}/s, {:.0} bytes/s)",
            report.received, report.received_per_second, report.bytes_per_second
        );
        println!(
            "relay latency ms   p50 {:.2}  p95 {:.2}  p99 {:.2}  max {:.2}",
            report.latency_ms_p50,
            report.latency_ms_p95,
            report.latency_ms_p99,
            report.latency_ms_max
        );
        println!(
            "lost {}  disconnects {}  errors {}",
            report.lost, report.disconnects, report.errors
        );
        if let Some((cpu, rss)) = server {
            println!("server             {cpu:.0}% CPU, {rss} KiB resident");
        }
        if let (Some(before), Some(bytes)) = (rss_before, per_connection) {
            println!(
                "server memory      {before} KiB before the bots, {bytes:.0} bytes per connection"
            );
        }
        if let Some(cpu) = bots_cpu {
            println!("bots (this process) {cpu:.0}% CPU");
        }
    }
    Ok(())
}
