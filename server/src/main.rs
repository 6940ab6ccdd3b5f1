//! `switchboard-server`: the dedicated Switchboard server.
//!
//! Runs the built-in board game ([`switchboard::board::BoardLogic`]): a
//! shared board of keys and values, seats, chat and whispers, usable by any
//! Switchboard client without game code. Prints a ready line
//! (`SWITCHBOARD READY <protocol> <port>`) once it listens, and shuts down
//! cleanly on Ctrl-C or SIGTERM. Started by `LocalServer` (environment
//! `SWITCHBOARD_CHILD=1`) it also stops when its stdin closes.

use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use switchboard::board::BoardLogic;
use switchboard::socket::BindScope;
use switchboard::ManagerConfig;

/// The dedicated Switchboard game server.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Who may connect: `loopback` (this machine only) or `all` (every
    /// interface).
    #[arg(long, default_value = "loopback", value_parser = parse_scope)]
    bind: BindScope,
    /// The port to listen on; 0 picks a free one (printed in the ready line).
    #[arg(long, default_value_t = 7000)]
    port: u16,
    /// A password clients must give to join.
    #[arg(long, env = "SWITCHBOARD_PASSWORD")]
    password: Option<String>,
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
}

fn parse_scope(text: &str) -> Result<BindScope, String> {
    match text {
        "loopback" | "127.0.0.1" | "localhost" => Ok(BindScope::Loopback),
        "all" | "0.0.0.0" => Ok(BindScope::AllInterfaces),
        other => match other.parse::<IpAddr>() {
            Ok(_) => Err(format!("{other}: use `loopback` or `all`")),
            Err(_) => Err(format!("{other}: expected `loopback` or `all`")),
        },
    }
}

fn main() -> ExitCode {
    // Started by LocalServer: configuration comes from the environment.
    switchboard::process::serve_if_child(BoardLogic::default);

    let args = Args::parse();
    let mut config = ManagerConfig {
        password: args.password.filter(|p| !p.is_empty()),
        ..ManagerConfig::default()
    };
    config.sessions.grace_period = Duration::from_secs(args.grace_secs);
    config.sessions.max_sessions = args.max_sessions;
    let logic = BoardLogic::new(args.seats.max(1));
    match switchboard::process::run_server(args.bind, args.port, config, logic, args.watch_stdin) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("switchboard-server: {err}");
            ExitCode::FAILURE
        }
    }
}
