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

use strategy::{client, editor, rules, scenario};

use switchboard::process::{LocalServer, LocalServerOptions};
use switchboard::socket::BindScope;

/// Command-line options, shared by the game and its server child.
#[derive(Debug, Default)]
struct Options {
    host: bool,
    join: Option<String>,
    edit: Option<PathBuf>,
    script: Option<String>,
    name: Option<String>,
    port: u16,
    password: Option<String>,
    scenario: String,
    saves: PathBuf,
    bot: Option<u32>,
    lobby: bool,
    text: bool,
    serve: bool,
    players: usize,
    masters: Vec<std::net::SocketAddr>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        scenario: "valley".into(),
        saves: PathBuf::from("saves"),
        ..Options::default()
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--host" => options.host = true,
            "--lobby" => options.lobby = true,
            "--text" => options.text = true,
            "--serve" => options.serve = true,
            "--master" => options
                .masters
                .push(value()?.parse().map_err(|_| "--master takes an IP:port")?),
            "--players" => {
                options.players = value()?.parse().map_err(|_| "--players takes a number")?
            }
            "--join" => options.join = Some(value()?),
            "--edit" => options.edit = Some(PathBuf::from(value()?)),
            "--script" => options.script = Some(value()?),
            "--name" => options.name = Some(value()?),
            "--port" => options.port = value()?.parse().map_err(|_| "--port takes a number")?,
            "--password" => options.password = Some(value()?),
            "--scenario" => options.scenario = value()?,
            "--saves" => options.saves = PathBuf::from(value()?),
            "--bot" => {
                options.bot = Some(
                    value()?
                        .parse()
                        .map_err(|_| "--bot takes a number of turns")?,
                )
            }
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

/// A built-in scenario by name, or a scenario file.
fn load_scenario(name: &str) -> Result<scenario::ServerScenario, String> {
    match scenario::builtin(name) {
        Some(s) => Ok(s),
        None => scenario::ServerScenario::load(std::path::Path::new(name))
            .map_err(|e| format!("{name}: {e}")),
    }
}

const USAGE: &str =
    "usage: strategy [--scenario valley|islands|FILE] [--bot TURNS] [--text] [--saves DIR]
       strategy --host [--port P] [--password X] [--name N] [--master IP:PORT] [--scenario ...]
       strategy --join ADDR [--name N] [--password X] [--bot TURNS [--players P]]
       strategy --serve [--port P] [--password X] [--master IP:PORT] [--scenario ...]
       strategy --edit FILE [--script \"cmd; cmd; ...\"]";

fn main() {
    // Re-invoked as the local server: this never returns.
    switchboard::process::serve_if_child(|| {
        let options = parse_options().unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        });
        let scenario = load_scenario(&options.scenario).unwrap_or_else(|e| {
            eprintln!("cannot load the scenario: {e}");
            std::process::exit(1)
        });
        rules::StrategyLogic::new(scenario, options.lobby, options.saves)
    });

    let options = match parse_options() {
        Ok(options) => options,
        Err(err) => {
            if !err.is_empty() {
                eprintln!("{err}");
            }
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
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

/// How the game appears in server browsers.
fn listing(options: &Options, dedicated: bool) -> switchboard::master::Announce {
    let scenario = load_scenario(&options.scenario)
        .map(|s| s.name)
        .unwrap_or_default();
    let info = switchboard::master::ServerInfo {
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
    switchboard::master::Announce::new(options.masters.clone(), info)
}

/// A dedicated server: no local player, every interface, a lobby; stops on
/// Ctrl-C or SIGTERM.
fn dedicated(options: &Options) -> Result<(), String> {
    let scenario = load_scenario(&options.scenario)?;
    let config = switchboard::ManagerConfig {
        password: options.password.clone(),
        announce: (!options.masters.is_empty()).then(|| listing(options, true)),
        ..switchboard::ManagerConfig::default()
    };
    let logic = rules::StrategyLogic::new(scenario, true, options.saves.clone());
    println!("dedicated strategy server; Ctrl-C stops it. Its port is in the ready line:");
    switchboard::process::run_server(BindScope::AllInterfaces, options.port, config, logic, false)
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
    let server = LocalServer::spawn(LocalServerOptions {
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
