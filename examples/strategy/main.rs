//! A small turn-based strategy game on Switchboard: provinces, nations, units,
//! turns; the server validates every order and each player sees only what its
//! nation sees. The four ways in:
//!
//! ```text
//! cargo run --release -p switchboard-strategy                          # single player (local server, loopback)
//! cargo run --release -p switchboard-strategy -- --host --port 7100    # host: lobby, others join
//! cargo run --release -p switchboard-strategy -- --join 127.0.0.1:7100 --name bob
//! cargo run --release -p switchboard-strategy -- --edit my.swst        # scenario editor, no network
//! cargo run --release -p switchboard-strategy -- --serve --port 7100   # dedicated server, no local player
//! ```
//!
//! `--scenario valley|islands|FILE` picks the scenario, `--bot N` lets a
//! scripted player play N turns (for demos and tests; a hosting bot starts
//! the game once `--players P` players are seated and ready), `--text` uses the
//! typed interface instead of the full-screen one, `--saves DIR` is where the
//! server keeps saved games.

use std::path::PathBuf;

use clap::Parser;
use strategy::{client, editor, rules, scenario};

use switchboard::process::{LocalServer, LocalServerOptions};
use switchboard::socket::BindScope;
use switchboard_master::{Announce, ServerInfo};

/// Command-line options, shared by the game and its server child.
#[derive(Debug, Parser)]
#[command(
    name = "strategy",
    about = "A small turn-based strategy game on Switchboard"
)]
struct Options {
    /// Host a game: a lobby on every interface that others join.
    #[arg(long)]
    host: bool,
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
    /// server): the same game for browser and JavaScript clients.
    #[arg(long)]
    ws_port: Option<u16>,
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
    /// A dedicated server: no local player, every interface, a lobby.
    #[arg(long)]
    serve: bool,
    /// A hosting bot starts the game once this many players are ready.
    #[arg(long, default_value_t = 0)]
    players: usize,
    /// Register with this master server (repeatable).
    #[arg(long = "master", value_name = "IP:PORT")]
    masters: Vec<std::net::SocketAddr>,
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
    switchboard::process::serve_if_child_with(
        |config| {
            config.listing = Announce::from_env().map(Announce::hook);
            config.server.websocket = websocket(&Options::parse());
        },
        || {
            let options = Options::parse();
            let scenario = load_scenario(&options.scenario).unwrap_or_else(|e| {
                eprintln!("cannot load the scenario: {e}");
                std::process::exit(1)
            });
            rules::StrategyLogic::new(scenario, options.lobby, options.saves)
        },
    );

    let options = Options::parse();
    let result = if let Some(path) = &options.edit {
        editor::run(path, options.script.as_deref(), options.text)
    } else if options.serve {
        dedicated(&options)
    } else if let Some(addr) = &options.join {
        let name = options.name.clone().unwrap_or_else(|| "guest".into());
        client::play(
            addr,
            &name,
            options.password.clone(),
            options.bot,
            options.text,
            options.players,
        )
    } else {
        local_game(&options)
    };
    if let Err(err) = result {
        eprintln!("{err}");
        std::process::exit(1);
    }
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
        ..Default::default()
    };
    Announce::new(options.masters.clone(), info)
}

/// A dedicated server: no local player, every interface, a lobby; stops on
/// Ctrl-C or SIGTERM.
fn dedicated(options: &Options) -> Result<(), String> {
    switchboard::process::init_stderr_logging();
    let scenario = load_scenario(&options.scenario)?;
    let mut config = switchboard::ManagerConfig {
        password: options.password.clone(),
        listing: (!options.masters.is_empty()).then(|| listing(options, true).hook()),
        ..switchboard::ManagerConfig::default()
    };
    config.server.websocket = websocket(options);
    let logic = rules::StrategyLogic::new(scenario, true, options.saves.clone());
    println!("dedicated strategy server; Ctrl-C stops it. Its port is in the ready line:");
    let (scope, port) = (BindScope::AllInterfaces, options.port);
    switchboard::process::run_server_with(scope, port, config, logic, false, |handle| {
        if let Some(addr) = handle.websocket_addr() {
            println!("WebSocket clients: ws://{addr}/");
        }
    })
    .map_err(|e| format!("server: {e}"))
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
    // A hosted game others can find: its child server lists itself.
    let env = (options.host && !options.masters.is_empty())
        .then(|| listing(options, false).to_env())
        .into_iter()
        .collect();
    let server = LocalServer::spawn(LocalServerOptions {
        env,
        args,
        scope: if options.host {
            BindScope::AllInterfaces
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
        println!(
            "hosting: others join with --join <this machine's address>:{}",
            server.port()
        );
    }
    let name = options.name.clone().unwrap_or_else(|| "player".into());
    let result = client::play(
        &server.addr().to_string(),
        &name,
        options.password.clone(),
        options.bot,
        options.text,
        options.players,
    );
    let pid = server.pid();
    let status = server
        .shutdown()
        .map_err(|e| format!("stopping the server: {e}"))?;
    println!("server {pid} stopped ({status})");
    result
}
