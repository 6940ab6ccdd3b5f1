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
//! default port 27900); `rooms` a rooms and lobby server
//! (`switchboard_rooms::RoomsLogic`); `relay` a real-time relay;
//! `rendezvous` a join-code relay for games hosted behind routers. Game,
//! rooms and relay servers take `--ws-port` for browsers and other
//! WebSocket clients.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

mod agones_cli;
mod hosting_cli;
mod load_cli;
mod master_cli;
#[cfg(target_os = "linux")]
mod netem_cli;
mod netsim_cli;
mod quic_cli;
mod relay_cli;
mod rendezvous_cli;
mod replay_cli;
mod rooms_cli;
mod scale;
mod tls_cli;
mod token_cli;
mod web;
use scale::RedisArgs;
use switchboard::socket::BindScope;
use switchboard::ManagerConfig;
use switchboard_master::{Announce, ServerInfo};
use switchboard_server::board::BoardLogic;

/// Switchboard's server for every mode.
///
/// With no subcommand: the built-in board game (seats, chat and whispers).
/// Every mode listens on loopback unless `--bind all` says otherwise.
#[derive(Debug, Parser)]
#[command(version, propagate_version = true)]
// An option of the board game's given with a subcommand is an error, not
// silently ignored: options go after the subcommand they belong to.
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    game: GameArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a master server that lists game servers.
    Master(master_cli::MasterArgs),
    /// Run a real-time relay (transforms relayed within zones).
    Relay(relay_cli::RelayArgs),
    /// Run a rooms server: lobby, rooms, RPC and replication for any game.
    Rooms(rooms_cli::RoomsArgs),
    /// Load-test a relay with bots, and report.
    Bots(load_cli::BotsArgs),
    /// Load-test a board server's manager path: requests broadcast to all.
    Requests(load_cli::RequestsArgs),
    /// Run a matchmaker for rooms servers sharing a Redis: one room list,
    /// new rooms on the least-loaded server, seats reserved.
    Matchmaker(scale::MatchmakerArgs),
    /// Replay a board game recorded with `--record FILE`, checking that
    /// every output is the recorded one.
    Replay(replay_cli::ReplayArgs),
    /// A loopback proxy that simulates a real network (latency, jitter,
    /// a bandwidth cap, stalls) between any client and a server, without
    /// root. It cannot lose a packet: for that, `netem`.
    Netsim(netsim_cli::NetsimArgs),
    /// A real network (root): a command in a network namespace behind an
    /// emulated link with delay, jitter, loss, bursts, bandwidth and
    /// outages; `netem exec -- COMMAND` runs a client on the other side.
    #[cfg(target_os = "linux")]
    Netem(netem_cli::NetemArgs),
    /// Run a join-code relay: hosts behind routers dial out to it and get
    /// a code; players join with `--join CODE@HOST:PORT`.
    Rendezvous(rendezvous_cli::RendezvousArgs),
    /// Mint a connect token (hex on stdout), as a fleet's backend does,
    /// for a server started with `--connect-token-key-file`.
    MintToken(token_cli::MintArgs),
}

/// The admin HTTP server (off unless a port is given).
#[derive(Debug, Args)]
struct AdminArgs {
    /// Serve the admin API and `/metrics` on this port (0 picks one).
    #[arg(long)]
    admin_port: Option<u16>,
    /// Where the admin server listens: `loopback` (default) or `all` (then
    /// a token is required).
    #[arg(long, default_value = "loopback", value_parser = parse_scope)]
    admin_bind: BindScope,
    /// The token controls need (`Authorization: Bearer ...`). Prefer
    /// `--admin-token-file` or SWITCHBOARD_ADMIN_TOKEN: a command line is
    /// visible to every user of the machine.
    #[arg(long, env = "SWITCHBOARD_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Read the admin token from this file (first line).
    #[arg(long, value_name = "PATH", conflicts_with = "admin_token")]
    admin_token_file: Option<std::path::PathBuf>,
    /// Admin connections open at once (cut to fit the open-file limit
    /// beside the game's listeners).
    #[arg(long, default_value_t = 64)]
    admin_max_connections: usize,
    /// Where recordings started from the admin page go (created when the
    /// first starts). Each is named after the mode and the time, and
    /// begins with a snapshot of the server.
    #[arg(long, value_name = "DIR", default_value = "recordings")]
    record_dir: std::path::PathBuf,
    /// How the admin server speaks to other machines: the mode's own TLS
    /// (its `--tls-cert`, `--data-dir`, `--insecure-plaintext`).
    #[arg(skip)]
    tls: switchboard::tls::TlsSettings,
}

impl AdminArgs {
    /// Raises the open-file limit and shares it among the process's
    /// listeners (`caps`, and this admin server's when it has a port), so
    /// that one filled to its cap leaves the others theirs.
    fn fit_listeners<'a>(&'a mut self, mut caps: Vec<(&'static str, &'a mut usize)>) {
        let files = switchboard::process::raise_open_files_limit();
        if self.admin_port.is_some() {
            caps.push(("admin", &mut self.admin_max_connections));
        }
        switchboard::process::share_descriptors(files.soft, RESERVED_FILES, &mut caps);
    }

    /// Starts the admin server for `source` if a port was given, with this
    /// process's calls to Redis in its metrics when it makes any; prints
    /// its address.
    async fn start(
        &self,
        source: impl switchboard_admin::AdminSource,
    ) -> Result<Option<switchboard_admin::RunningAdmin>, String> {
        let Some(port) = self.admin_port else {
            return Ok(None);
        };
        let token = match &self.admin_token_file {
            Some(path) => Some(read_password(path)?),
            None => {
                if std::env::args().any(|a| a == "--admin-token" || a.starts_with("--admin-token="))
                {
                    tracing::warn!(
                        "the admin token on the command line is visible to every user of this machine; use --admin-token-file or SWITCHBOARD_ADMIN_TOKEN"
                    );
                }
                self.admin_token.clone()
            }
        };
        let config = switchboard_admin::AdminConfig {
            token,
            max_connections: self.admin_max_connections,
            tls: self.tls.clone(),
            ..switchboard_admin::AdminConfig::default()
        };
        let source = switchboard_admin::WithCounters::new(source, || {
            switchboard_redis::calls().map_or_else(Vec::new, |calls| calls.counters())
        });
        let admin = switchboard_admin::AdminServer::builder(std::sync::Arc::new(source))
            .bind(self.admin_bind)
            .port(port)
            .config(config)
            .spawn()
            .map_err(|e| e.to_string())?;
        // The page's URL: the API is under /api/, the metrics at /metrics.
        // Whoever started the server may have stopped reading its stdout
        // (after the ready line): that is not the server's failure.
        let _ = std::io::Write::write_fmt(
            &mut std::io::stdout(),
            format_args!("admin: http://{}/\n", admin.local_addr()),
        );
        Ok(Some(admin))
    }
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
    /// Record every input to FILE, for `switchboard-server replay FILE`.
    #[arg(long, value_name = "FILE")]
    record: Option<std::path::PathBuf>,
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
    #[arg(long, default_value_t = 5.0)]
    heartbeat_secs: f64,
    #[command(flatten)]
    ws: web::WsArgs,
    #[command(flatten)]
    quic: quic_cli::QuicArgs,
    #[command(flatten)]
    tls: tls_cli::TlsArgs,
    #[command(flatten)]
    tokens: token_cli::TokenArgs,
    #[command(flatten)]
    redis: RedisArgs,
    #[command(flatten)]
    map: hosting_cli::MapArgs,
    #[command(flatten)]
    link: hosting_cli::LinkArgs,
    #[command(flatten)]
    admin: AdminArgs,
    #[command(flatten)]
    agones: agones_cli::AgonesArgs,
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
        Some(Command::Master(args)) => master_cli::run_master(args),
        Some(Command::Relay(args)) => relay_cli::run_relay(args),
        Some(Command::Rooms(args)) => rooms_cli::run_rooms(args),
        Some(Command::Bots(args)) => load_cli::run_bots(args),
        Some(Command::Requests(args)) => load_cli::run_requests(args),
        Some(Command::Matchmaker(args)) => scale::run_matchmaker(args),
        Some(Command::Replay(args)) => replay_cli::run_replay(args),
        Some(Command::Netsim(args)) => netsim_cli::run_netsim(args),
        #[cfg(target_os = "linux")]
        Some(Command::Netem(args)) => netem_cli::run_netem(args),
        Some(Command::Rendezvous(args)) => rendezvous_cli::run_rendezvous(args),
        Some(Command::MintToken(args)) => token_cli::run_mint(args),
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
    let agones = args.agones.connect()?;
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
    let mut config = ManagerConfig::default();
    config.rules.password = password.filter(|p| !p.is_empty());
    config.rules.sessions.grace_period = Duration::from_secs(args.grace_secs);
    config.rules.sessions.max_sessions = args.max_sessions;
    args.ws.apply(&mut config.server, web::Pages::Client);
    args.quic.apply(&mut config.server);
    args.tls.apply(&mut config.server, args.bind)?;
    config.connect_tokens = args.tokens.rules()?;
    args.redis.share_sessions(&mut config)?;
    if !args.masters.is_empty() {
        let info = ServerInfo {
            name: args.name,
            game_type: "board".into(),
            scenario: format!("{} seats", args.seats),
            password: config.rules.password.is_some(),
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
    let seats = args.seats.max(1);
    config.record = args.record.map(|path| switchboard::manager::RecordConfig {
        initial_state: Some(vec![seats]),
        ..switchboard::manager::RecordConfig::to(path)
    });
    let logic = BoardLogic::new(seats);
    let mut admin = args.admin;
    admin.tls = config.server.tls.clone();
    admin.fit_listeners(vec![("game", &mut config.server.max_connections)]);
    let listen = Listen {
        bind: args.bind,
        port: args.port,
        watch_stdin: args.watch_stdin,
        map: args.map.clone(),
        link: args.link.clone().with_identity(&args.tls)?,
        agones: agones.map(|a| (a, agones_cli::ManagerReport::default())),
    };
    run_manager("board", listen, config, logic, admin, |_| {})
}

/// Open files a server keeps out of its listeners' caps: logs, saves,
/// Redis, the runtime's own.
const RESERVED_FILES: u64 = 64;

/// Where a manager listens, whether it stops with its stdin, how
/// players on the internet reach it (the router's port mapping, a
/// join-code relay), and its Agones sidecar when it runs in a fleet.
#[derive(Debug)]
struct Listen {
    bind: BindScope,
    port: u16,
    watch_stdin: bool,
    map: hosting_cli::MapArgs,
    link: hosting_cli::LinkArgs,
    agones: Option<(switchboard_agones::Agones, agones_cli::ManagerReport)>,
}

/// Runs a `ServerManager` with `logic` until a signal (or stdin's end):
/// the ready line, the WebSocket address, the admin server, and what
/// `started` adds (a compatibility listener).
fn run_manager<L: switchboard::GameLogic>(
    mode: &'static str,
    listen: Listen,
    config: ManagerConfig,
    logic: L,
    admin: AdminArgs,
    started: impl FnOnce(&switchboard::ManagerHandle),
) -> Result<(), String> {
    let Listen {
        bind,
        port,
        watch_stdin,
        map,
        link,
        agones,
    } = listen;
    map.check(bind)?;
    // Mapped once the ports are known; removed after the server stops.
    let maps = std::sync::Arc::new(std::sync::Mutex::new(hosting_cli::PortMaps::default()));
    let held = maps.clone();
    // Ready once listening; its life on Agones ends with the server.
    let fleet = std::sync::Arc::new(std::sync::Mutex::new(None));
    let in_fleet = fleet.clone();
    let failure = agones_cli::Failure::default();
    let failed = failure.clone();
    let server = switchboard::ServerManager::builder(logic)
        .config(config)
        .bind(bind)
        .port(port)
        .watch_stdin(watch_stdin);
    let started = server.on_start(move |handle| {
        web::announce(
            handle.websocket_addr(),
            handle.tls().is_some(),
            web::Pages::Client,
        );
        quic_cli::announce(handle.quic_addr(), handle.webtransport());
        let ports = hosting_cli::ports_to_map(
            ("game", handle.local_addr().port()),
            handle.websocket_addr(),
            handle.quic_addr(),
        );
        *held.lock().unwrap_or_else(|e| e.into_inner()) = map.start(&ports);
        // Kept for as long as the server runs (its task ends with it).
        if let Some(link) = link.start(handle) {
            tokio::spawn(async move {
                let _link = link;
                std::future::pending::<()>().await
            });
        }
        started(handle);
        if let Some((agones, shape)) = agones {
            let running = agones_cli::serve_manager(agones, handle, shape, failed);
            *in_fleet.lock().unwrap_or_else(|e| e.into_inner()) = Some(running);
        }
        let source = switchboard_admin::ManagerAdmin::new(mode, handle.clone())
            .with_recordings(admin.record_dir.clone());
        tokio::spawn(async move {
            match admin.start(source).await {
                // Kept for as long as the server runs.
                Ok(server) => {
                    let _server = server;
                    std::future::pending::<()>().await
                }
                Err(err) => tracing::error!(%err, "admin server not started"),
            }
        });
    });
    let ran = started.run().map(drop).map_err(|e| e.to_string());
    drop(fleet.lock().unwrap_or_else(|e| e.into_inner()).take());
    let ran = failure.or(ran);
    std::mem::take(&mut *maps.lock().unwrap_or_else(|e| e.into_inner())).stop();
    ran
}

/// The first line of a password file, without its line ending.
fn read_password(path: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the password file {}: {e}", path.display()))?;
    Ok(text.lines().next().unwrap_or("").to_string())
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    runtime_with(2)
}

fn runtime_with(threads: usize) -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}
