//! `strategy --serve --record FILE` records a dedicated game;
//! `strategy --replay FILE` serves the recording live, so that the game's
//! own client watches it (`strategy --join ADDR`).

use std::path::Path;
use std::time::Instant;

use switchboard::record::{RecordError, RecordReader, ReplayError, Replayer};
use switchboard::spectate::{spectate_with, stdin_commands, Listening, SpectateConfig};

use crate::rules::StrategyLogic;
use crate::scenario::ServerScenario;

/// What a recording keeps to rebuild the game: the scenario's name or file.
pub fn initial_state(scenario: &str) -> Vec<u8> {
    scenario.as_bytes().to_vec()
}

/// Serves the recording at `path` as `config` says (where, how fast, whose
/// view: by default the first player), with `load` turning the recorded
/// scenario's name back into the scenario.
pub fn serve(
    path: &Path,
    config: SpectateConfig,
    saves: &Path,
    load: impl Fn(&str) -> Result<ServerScenario, String>,
) -> Result<(), String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let reader = RecordReader::new(std::io::BufReader::new(file))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // A recording started mid-game names no scenario: its snapshot holds
    // the whole game, put back over the built-in one the logic starts as.
    let name = reader.header().initial_state.as_deref().map_or_else(
        || "valley".into(),
        |state| String::from_utf8_lossy(state).into_owned(),
    );
    let scenario = load(&name)?;
    // The first replayer reads what was opened; a seek back opens the file
    // again.
    let mut first = Some(reader);
    let open = || {
        let reader = match first.take() {
            Some(reader) => reader,
            None => {
                let file = std::fs::File::open(path).map_err(RecordError::Io)?;
                RecordReader::new(std::io::BufReader::new(file))?
            }
        };
        let logic = |_: &_| StrategyLogic::new(scenario.clone(), true, saves.to_path_buf());
        Ok(Replayer::new(reader, logic, Instant::now()))
    };
    let listening = |at: Listening| {
        println!(
            "replaying {}: watch with strategy --join 127.0.0.1:{} (stdin: pause, play, speed X, seek RECORD)",
            path.display(),
            at.addr.port()
        );
        if let Some(addr) = at.websocket {
            println!("WebSocket spectators: ws://{addr}/");
        }
    };
    let report = spectate_with(open, config, listening, stdin_commands());
    match report {
        Ok(report) => {
            println!("{} inputs replayed, every output identical", report.inputs);
            Ok(())
        }
        Err(ReplayError::Diverged(divergence)) => Err(format!("diverged:\n{divergence}")),
        Err(err) => Err(err.to_string()),
    }
}
