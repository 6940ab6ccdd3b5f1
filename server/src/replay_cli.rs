//! `switchboard-server replay FILE`: a recorded board game, rooms server or
//! relay fed to a fresh core, every output compared with the recorded
//! run's; with `--serve PORT`, served live to spectators.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use switchboard::record::{replay, Header, RecordReader, ReplayError, Replayer};
use switchboard::spectate::{spectate_with, Listening, SpectateConfig};
use switchboard::GameLogic;
use switchboard_rooms::RoomsLogic;
use switchboard_server::board::BoardLogic;

#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// A recording made with `--record FILE`.
    file: PathBuf,
    /// Serve the replay live on this port: spectators connect with the
    /// game's client and watch one recorded player's view.
    #[arg(long, value_name = "PORT")]
    serve: Option<u16>,
    /// With `--serve`: how much faster than recorded.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// With `--serve`: whose view spectators get (a recorded player's
    /// name; default the first to join).
    #[arg(long, value_name = "NAME")]
    follow: Option<String>,
    /// With `--serve`: feed the records up to this number at once, then
    /// pace the rest. While a replay serves, stdin takes `pause`, `play`,
    /// `speed X` and `seek RECORD` (back or forth).
    #[arg(long = "from", value_name = "RECORD", default_value_t = 0)]
    skip_to: u64,
    /// With `--serve`: spectators over WebSocket too (browsers, the
    /// JavaScript client), on this port (0 picks one).
    #[arg(long, value_name = "PORT")]
    serve_ws: Option<u16>,
}

impl ReplayArgs {
    /// How a replay is served, on `port`.
    fn spectate_config(&self, port: u16) -> SpectateConfig {
        SpectateConfig {
            port,
            speed: self.speed,
            follow: self.follow.clone(),
            skip_to: self.skip_to,
            websocket: self.serve_ws.map(switchboard::WebSocketConfig::on_port),
            ..SpectateConfig::default()
        }
    }
}

/// Prints where spectators connect: the ready line, then each address.
fn print_listening(at: Listening, how: &str) {
    println!("{}", switchboard::process::ready_line(at.addr.port()));
    println!("spectators: connect {how} to {}", at.addr);
    if let Some(addr) = at.websocket {
        println!("WebSocket spectators: ws://{addr}/");
    }
}

/// Replays the recording (the board game's or a rooms server's); an error
/// says where the replay diverged, or why the file could not be read.
pub(crate) fn run_replay(args: ReplayArgs) -> Result<(), String> {
    if switchboard_relay::record::is_relay_recording(&args.file) {
        return replay_relay(&args);
    }
    let file =
        std::fs::File::open(&args.file).map_err(|e| format!("{}: {e}", args.file.display()))?;
    let reader = RecordReader::new(std::io::BufReader::new(file))
        .map_err(|e| format!("{}: {e}", args.file.display()))?;
    let header = reader.header().clone();
    println!(
        "replaying {} ({}, Switchboard {})",
        args.file.display(),
        header.logic,
        header.version
    );
    if header.logic.ends_with("BoardLogic") {
        let seats = header
            .initial_state
            .as_deref()
            .and_then(|state| state.first().copied())
            .unwrap_or(8);
        run(reader, move |_: &Header| BoardLogic::new(seats), args)
    } else if header.logic.ends_with("RoomsLogic") {
        run(reader, |_: &Header| RoomsLogic::new(), args)
    } else {
        Err(format!(
            "{}: a recording of {}; this command replays the board game and rooms servers (a game replays its own logic with switchboard::record::replay)",
            args.file.display(),
            header.logic
        ))
    }
}

/// Replays, or serves the replay to spectators, and says how it went.
fn run<L: GameLogic>(
    reader: RecordReader<std::io::BufReader<std::fs::File>>,
    make_logic: impl Fn(&Header) -> L + Clone,
    args: ReplayArgs,
) -> Result<(), String> {
    let started = Instant::now();
    let result = match args.serve {
        Some(port) => {
            let config = args.spectate_config(port);
            // The first replayer reads what was opened; a seek back opens
            // the file again.
            let mut first = Some(reader);
            let path = args.file.clone();
            let open = move || {
                let reader = match first.take() {
                    Some(reader) => reader,
                    None => {
                        let file = std::fs::File::open(&path)
                            .map_err(switchboard::record::RecordError::Io)?;
                        RecordReader::new(std::io::BufReader::new(file))?
                    }
                };
                Ok(Replayer::new(reader, make_logic.clone(), Instant::now()))
            };
            spectate_with(
                open,
                config,
                |at| {
                    print_listening(at, "the game's client");
                    println!("stdin takes pause, play, speed X, seek RECORD");
                },
                switchboard::spectate::stdin_commands(),
            )
        }
        None => replay(reader, make_logic, Instant::now()),
    };
    match result {
        Ok(report) => {
            println!(
                "{} inputs over {:.1} s of play replayed in {:.3} s: {} outputs, every one identical",
                report.inputs,
                report.span.as_secs_f64(),
                started.elapsed().as_secs_f64(),
                report.outputs
            );
            if let Some(why) = report.stopped {
                println!("the recording stopped early: {why}");
            }
            Ok(())
        }
        Err(ReplayError::Diverged(divergence)) => Err(format!("diverged:\n{divergence}")),
        Err(err) => Err(err.to_string()),
    }
}

/// A relay's recording: every call replayed on a fresh relay core, every
/// answer compared; with `--serve`, served to spectators as it goes.
fn replay_relay(args: &ReplayArgs) -> Result<(), String> {
    let name = args.file.display();
    let open = || std::fs::File::open(&args.file).map(std::io::BufReader::new);
    println!("replaying {name} (a relay)");
    let started = Instant::now();
    let report = match args.serve {
        Some(port) => {
            let config = args.spectate_config(port);
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            let _entered = runtime.enter();
            let listening = |at| {
                print_listening(at, "a relay client");
                println!("stdin takes pause, play, speed X, seek RECORD");
            };
            let commands = Some(switchboard::spectate::stdin_commands());
            runtime
                .block_on(switchboard_relay::record::watch_with(
                    open, config, listening, commands,
                ))
                .map_err(|e| format!("{name}: {e}"))?
        }
        None => {
            let file = open().map_err(|e| format!("{name}: {e}"))?;
            switchboard_relay::record::replay(file).map_err(|e| format!("{name}: {e}"))?
        }
    };
    if let Some(d) = report.divergence {
        return Err(format!(
            "diverged at record {} ({:?}): recorded answer {:016x}, replayed {:016x}",
            d.record, d.input, d.recorded, d.replayed
        ));
    }
    let ending = match &report.stopped {
        Some(why) => format!(" (the recording stopped early: {why})"),
        None => String::new(),
    };
    println!(
        "replayed {} calls in {:.1} s: every answer identical{ending}",
        report.calls,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
