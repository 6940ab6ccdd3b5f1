//! A small turn-based strategy game on Switchboard: provinces, nations, units,
//! turns; the server validates every order and each player sees only what its
//! nation sees. The four ways in:
//!
//! ```text
//! cargo run --release -p switchboard-strategy                          # single player (local server, loopback)
//! cargo run --release -p switchboard-strategy -- --host --bind all --port 7100  # host: lobby, others join
//! cargo run --release -p switchboard-strategy -- --join 127.0.0.1:7100 --name bob
//! cargo run --release -p switchboard-strategy -- --edit my.swst        # scenario editor, no network
//! cargo run --release -p switchboard-strategy -- --serve --port 7100   # dedicated server, no local player
//! ```
//!
//! A game that must outlive its server process (`docs/SCALING.md`):
//!
//! ```text
//! strategy --serve --port 7100 --redis redis://127.0.0.1:6379/ --game g1 --master 127.0.0.1:27900
//! strategy --game g1 --master 127.0.0.1:27900 --name ada       # join it wherever it is served
//! strategy --serve --port 7101 --redis redis://127.0.0.1:6379/ --game g1 --master 127.0.0.1:27900
//! #   ^ after the first server died: resumes g1 from its last completed turn
//! ```
//!
//! `--scenario valley|islands|FILE` picks the scenario, `--bot N` lets a
//! scripted player play N turns (for demos and tests; a hosting bot starts
//! the game once `--players P` players are seated and ready), `--text` uses the
//! typed interface instead of the full-screen one, `--saves DIR` is where the
//! server keeps saved games.

use std::path::PathBuf;

use clap::Parser;
use strategy::directory::{Directory, GAME_TAG};
use strategy::{client, editor, rules, scenario};

use switchboard::process::{LocalServer, LocalServerOptions};
use switchboard::socket::BindScope;
use switchboard_master::{Announce, ServerInfo};

mod dedicated;
#[cfg(feature = "agones")]
mod fleet;
mod hosting;
mod reach;

/// Command-line options, shared by the game and its server child.
#[derive(Debug, Parser)]
#[command(
    name = "strategy",
    about = "A small turn-based strategy game on Switchboard"
)]
struct Options {
    /// Host a game: a lobby that others join (with `--bind all`, from
    /// other machines).
    #[arg(long)]
    host: bool,
    /// With `--host`, `--serve` or `--replay`: who may connect: `loopback`
    /// (this machine only) or `all` (every interface). A single-player
    /// game is always loopback only.
    #[arg(long, default_value = "loopback", value_parser = parse_scope)]
    bind: BindScope,
    /// Join a game at HOST:PORT.
    #[arg(long, value_name = "ADDR")]
    join: Option<String>,
    /// Edit a scenario file (no network, no server).
    #[arg(long, value_name = "FILE")]
    edit: Option<PathBuf>,
    /// Editor commands to run, separated by ';' (with --edit).
    #[arg(long)]
    script: Option<String>,
    /// The player's name (the listed name for a server).
    #[arg(long)]
    name: Option<String>,
    /// The port to host or serve on (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Also take players over WebSocket on this port (host or dedicated
    /// server; with `--replay`, spectators): the same game for browser and
    /// JavaScript clients.
    #[arg(long)]
    ws_port: Option<u16>,
    /// Also take players over QUIC on this UDP port (host or dedicated
    /// server): `quic://host:port`, the same game with nothing held back by
    /// a lost packet.
    #[arg(long)]
    quic_port: Option<u16>,
    /// A join password.
    #[arg(long)]
    password: Option<String>,
    /// valley, islands, or a scenario file.
    #[arg(long, default_value = "valley")]
    scenario: String,
    /// Where the server keeps saved games.
    #[arg(long, default_value = "saves")]
    saves: PathBuf,
    /// A scripted player plays this many turns (demos and tests).
    #[arg(long, value_name = "TURNS")]
    bot: Option<u32>,
    /// The server starts in the lobby (set for the hosted child).
    #[arg(long, hide = true)]
    lobby: bool,
    /// The typed interface instead of the full-screen one.
    #[arg(long)]
    text: bool,
    /// A dedicated server: no local player, a lobby (`--bind all` serves other machines).
    #[arg(long)]
    serve: bool,
    /// A hosting bot starts the game once this many players are ready.
    #[arg(long, default_value_t = 0)]
    players: usize,
    /// Register with this master server (repeatable); with `--game` and
    /// no `--join`, where to look the game up.
    #[arg(long = "master", value_name = "IP:PORT")]
    masters: Vec<std::net::SocketAddr>,
    /// A named game: a server (`--serve`) keeps its checkpoints and
    /// sessions in `--redis` and lists it under this name; a player joins
    /// it wherever the masters say it is served, and follows it there.
    #[arg(long, value_name = "NAME")]
    game: Option<String>,
    /// Share sessions and checkpoints through this Redis (`--serve`).
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// With `--serve --game NAME`: start NAME as a new game. Without it a
    /// server resumes NAME from its checkpoint, and says so plainly when
    /// there is none.
    #[arg(long)]
    new_game: bool,
    /// With `--serve --game NAME`: how long the game's lease in Redis lives
    /// unless renewed (one server per game; a replacement takes over within
    /// it after a crash, at once after a clean stop).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    lease_ms: u64,
    /// With `--serve`: record every input to FILE (`--replay FILE` serves
    /// it back; `switchboard-server`'s docs/RECORDING.md).
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Serve a recording live on `--port`: players watch it with `--join`.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
    /// With `--replay`: how much faster than recorded.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// With `--host --bind all`: do not ask the home router to forward the
    /// game's port (by default it is asked, with PCP, NAT-PMP, then UPnP,
    /// and the lobby says where players on the internet join).
    #[arg(long)]
    no_map_port: bool,
    /// The gateway PCP and NAT-PMP ask (default: the default route's).
    #[arg(long, value_name = "IP", hide = true)]
    gateway: Option<std::net::IpAddr>,
    /// Where the UPnP search goes (default SSDP's group; tests).
    #[arg(long, value_name = "ADDR", hide = true)]
    upnp_search: Option<std::net::SocketAddr>,
    /// With `--host`: also take players through the join-code relay at
    /// HOST:PORT (`switchboard-server rendezvous`): the lobby shows the
    /// code, players join with `--join CODE@HOST:PORT`. For a router that
    /// forwards nothing, or to keep this machine's address to yourself.
    #[arg(long, value_name = "HOST:PORT")]
    rendezvous: Option<String>,
    /// With `--join`: the host's TLS fingerprint, as the host's lobby or
    /// server printed it (`tls: sha256 ...`): the server is trusted by it
    /// alone. Without it, the first join to a server beyond this machine
    /// remembers its key, and a changed key is refused.
    #[arg(long, value_name = "FINGERPRINT")]
    trust: Option<switchboard::tls::Fingerprint>,
    /// Forgets the key remembered for HOST:PORT (to accept a server's new
    /// key once its host confirmed the new fingerprint), then goes on.
    #[arg(long, value_name = "HOST:PORT")]
    forget_host: Option<String>,
    /// With `--serve`: on an Agones fleet (a build with the `agones`
    /// feature; docs/DEPLOY.md).
    #[cfg(feature = "agones")]
    #[command(flatten)]
    agones: switchboard_agones::AgonesArgs,
}

/// A built-in scenario by name, or a scenario file.
fn load_scenario(name: &str) -> Result<scenario::ServerScenario, String> {
    match scenario::builtin(name) {
        Some(s) => Ok(s),
        None => scenario::ServerScenario::load(std::path::Path::new(name))
            .map_err(|e| format!("{name}: {e}")),
    }
}

fn main() {
    // Re-invoked as the local server: this never returns.
    switchboard::process::serve_if_child(|| {
        let options = Options::parse();
        let scenario = load_scenario(&options.scenario).unwrap_or_else(|e| {
            eprintln!("cannot load the scenario: {e}");
            std::process::exit(1)
        });
        let config = switchboard::ManagerConfig {
            listing: Announce::from_env().map(Announce::hook),
            server: switchboard::socket::EndpointConfig {
                websocket: websocket(&options),
                quic: quic(&options),
                ..Default::default()
            },
            ..Default::default()
        };
        let logic = rules::StrategyLogic::new(scenario, options.lobby, options.saves);
        switchboard::ServerManager::builder(logic).config(config)
    });

    let options = Options::parse();
    let result = if let Some(path) = &options.edit {
        editor::run(path, options.script.as_deref(), options.text)
    } else if let Some(path) = &options.replay {
        let config = switchboard::spectate::SpectateConfig {
            scope: options.bind,
            port: options.port,
            speed: options.speed,
            follow: options.name.clone(),
            websocket: websocket(&options),
            ..Default::default()
        };
        strategy::replay::serve(path, config, &options.saves, load_scenario)
    } else if options.serve {
        serve(&options)
    } else if options.join.is_some() || options.game.is_some() {
        join(&options)
    } else {
        local_game(&options)
    };
    if let Err(err) = result {
        eprintln!("{err}");
        std::process::exit(1);
    }
}

/// Joins the game at `--join`, or the one `--game` names wherever the
/// masters say it is; with both a name and masters, follows it to another
/// server when its own dies.
fn join(options: &Options) -> Result<(), String> {
    if let Some(server) = &options.forget_host {
        let known_hosts = switchboard::tls::default_data_dir().join("known_hosts");
        switchboard::tls::KnownHosts::forget(&known_hosts, server).map_err(|e| e.to_string())?;
        eprintln!("forgot the key of {server} ({})", known_hosts.display());
    }
    let directory = options.game.clone().map(|game| Directory {
        masters: options.masters.clone(),
        game,
    });
    let addr = match (&options.join, &directory) {
        (Some(addr), _) => addr.clone(),
        (None, Some(directory)) => directory
            .servers()?
            .into_iter()
            .next()
            .ok_or_else(|| format!("no server lists game {:?}", directory.game))?,
        (None, None) => return Err("--join ADDR or --game NAME".into()),
    };
    client::play(client::Play {
        addr,
        name: options.name.clone().unwrap_or_else(|| "guest".into()),
        password: options.password.clone(),
        directory: directory.filter(|d| !d.masters.is_empty()),
        local: None,
        invite: None,
        reach: None,
        bot: options.bot,
        text: options.text,
        players: options.players,
        trust: options.trust,
    })
}

/// The QUIC listener `--quic-port` asks for.
/// The dedicated server, on an Agones fleet with `--agones`.
fn serve(options: &Options) -> Result<(), String> {
    #[cfg(feature = "agones")]
    if let Some(agones) = options.agones.connect()? {
        if options.game.is_some() || options.record.is_some() {
            return Err("--agones serves the game its allocation names (switchboard.dev/game): not with --game or --record".into());
        }
        switchboard::process::init_stderr_logging();
        return fleet::serve(options, agones);
    }
    dedicated::serve(options)
}

fn quic(options: &Options) -> Option<switchboard::socket::quic::QuicConfig> {
    options
        .quic_port
        .map(switchboard::socket::quic::QuicConfig::on)
}

/// The WebSocket listener `--ws-port` asks for.
fn websocket(options: &Options) -> Option<switchboard::WebSocketConfig> {
    options.ws_port.map(switchboard::WebSocketConfig::on_port)
}

/// How the game appears in server browsers.
fn listing(options: &Options, dedicated: bool) -> Announce {
    let scenario = load_scenario(&options.scenario)
        .map(|s| s.name)
        .unwrap_or_default();
    let info = ServerInfo {
        name: options
            .name
            .clone()
            .unwrap_or_else(|| "strategy game".into()),
        game_type: "strategy".into(),
        scenario,
        password: options.password.is_some(),
        dedicated,
        version: env!("CARGO_PKG_VERSION").into(),
        tags: options
            .game
            .iter()
            .map(|game| (GAME_TAG.to_string(), game.clone()))
            .collect(),
        ..Default::default()
    };
    Announce::new(options.masters.clone(), info)
}

/// Single player or host: start this executable as the server child, play,
/// and stop it when the game ends.
fn local_game(options: &Options) -> Result<(), String> {
    // Check the scenario here, so that a bad one is a clear error at once.
    load_scenario(&options.scenario)?;
    let mut args = vec![
        "--scenario".to_string(),
        options.scenario.clone(),
        "--saves".into(),
    ];
    args.push(options.saves.display().to_string());
    if options.host {
        args.push("--lobby".into());
    }
    if let Some(port) = options.ws_port {
        args.extend(["--ws-port".to_string(), port.to_string()]);
    }
    if let Some(port) = options.quic_port {
        args.extend(["--quic-port".to_string(), port.to_string()]);
    }
    // A hosted game others can find: its child server lists itself.
    let env = (options.host && !options.masters.is_empty())
        .then(|| listing(options, false).to_env())
        .into_iter()
        .collect();
    let mut server = LocalServer::spawn(LocalServerOptions {
        env,
        args,
        scope: if options.host {
            options.bind
        } else {
            BindScope::Loopback
        },
        port: options.port,
        password: options.password.clone(),
        ..LocalServerOptions::default()
    })
    .map_err(|e| format!("cannot start the local server: {e}"))?;
    println!("server pid {} on port {}", server.pid(), server.port());
    if let Some(port) = options.ws_port.filter(|_| options.host) {
        println!("browsers and WebSocket clients join at ws://<this machine's address>:{port}/");
    }
    if options.host {
        println!("{}", where_to_join(options.bind, server.port()));
        if options.bind != BindScope::Loopback {
            // The server's own identity, kept beside this one's: players
            // pin it so that nobody in between can pose as this game.
            match switchboard::tls::ServerIdentity::load_or_create(
                &switchboard::tls::default_data_dir(),
            ) {
                Ok(identity) => println!(
                    "players from other machines join with --trust {}",
                    identity.fingerprint()
                ),
                Err(err) => eprintln!("the server's TLS identity: {err}"),
            }
        }
    }
    let pid = server.pid();
    let (news, heard) = std::sync::mpsc::channel();
    let reach = options
        .host
        .then(|| reach::Reach::start(reach_plan(options, &server), &news));
    let result = client::play(client::Play {
        addr: server.addr().to_string(),
        name: options.name.clone().unwrap_or_else(|| "player".into()),
        password: options.password.clone(),
        directory: None,
        invite: options.host.then(|| invite(options.bind, server.port())),
        reach: options.host.then_some(heard),
        local: Some(&mut server),
        bot: options.bot,
        text: options.text,
        players: options.players,
        trust: None,
    });
    // The guests of a hosted game are told why it ends.
    let stopped = if options.host {
        let name = options.name.as_deref().unwrap_or("player");
        server.shutdown_with(&format!("the host, {name}, quit"))
    } else {
        server.shutdown()
    };
    let status = stopped.map_err(|e| format!("stopping the server: {e}"))?;
    println!("server {pid} stopped ({status})");
    if let Some(reach) = reach {
        reach.stop();
    }
    result
}

/// How a hosted game reaches players on the internet: a game on every
/// interface asks the home router to forward its ports (unless
/// `--no-map-port`), checked by its masters; `--rendezvous` is the relay
/// to fall back on. Each step comes to the player's log and lobby; the
/// mapping is removed when the game ends, and on Ctrl-C.
fn reach_plan(options: &Options, server: &LocalServer) -> reach::Plan {
    let map = (options.bind != BindScope::Loopback && !options.no_map_port).then(|| {
        let mut config = switchboard_hosting::PortMapConfig {
            gateway: options.gateway,
            ..Default::default()
        };
        if let Some(search) = options.upnp_search {
            config.upnp_search = search;
        }
        config
    });
    use switchboard_hosting::Protocol;
    let mut ports = vec![("game", server.port(), Protocol::Tcp)];
    ports.extend(
        options
            .ws_port
            .map(|port| ("WebSocket", port, Protocol::Tcp)),
    );
    ports.extend(
        options
            .quic_port
            .filter(|port| *port != 0)
            .map(|port| ("QUIC", port, Protocol::Udp)),
    );
    reach::Plan {
        map,
        ports,
        masters: options.masters.clone(),
        relay: options.rendezvous.clone(),
        server: server.addr(),
        listing: (!options.masters.is_empty()).then(|| server.listing_tagger()),
    }
}

/// `--bind loopback` or `all`.
fn parse_scope(text: &str) -> Result<BindScope, String> {
    match text {
        "loopback" | "127.0.0.1" | "localhost" => Ok(BindScope::Loopback),
        "all" | "0.0.0.0" => Ok(BindScope::AllInterfaces),
        other => Err(format!("{other}: expected `loopback` or `all`")),
    }
}

/// The line that says where others join a game served on `port`.
fn where_to_join(scope: BindScope, port: u16) -> String {
    format!("join with --join {}", invite(scope, port))
}

/// Where others join a game served on `port`: this machine's address on
/// its network (with `--bind all`), or loopback and how to open it.
fn invite(scope: BindScope, port: u16) -> String {
    if scope == BindScope::Loopback {
        return format!("127.0.0.1:{port} (this machine only; --bind all lets others in)");
    }
    match switchboard::socket::lan_address() {
        Some(ip) => format!("{ip}:{port} (from this network)"),
        None => format!("<this machine's address>:{port}"),
    }
}
