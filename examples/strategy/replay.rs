//! `strategy --serve --record FILE` records a dedicated game;
//! `strategy --replay FILE` serves the recording live, so that the game's
//! own client watches it (`strategy --join ADDR`).

use std::path::Path;
use std::time::Instant;

use switchboard::record::{RecordReader, ReplayError, Replayer};
use switchboard::spectate::{spectate, SpectateConfig};

use crate::rules::StrategyLogic;
use crate::scenario::ServerScenario;

/// What a recording keeps to rebuild the game: the scenario's name or file.
pub fn initial_state(scenario: &str) -> Vec<u8> {
    scenario.as_bytes().to_vec()
}

/// Serves the recording at `path` on `port` of `scope`, paced at
/// `speed`, showing `follow`'s view (default the first player), with
/// `load` turning the recorded scenario's name back into the scenario.
pub fn serve(
    path: &Path,
    scope: switchboard::BindScope,
    port: u16,
    speed: f64,
    follow: Option<String>,
    saves: &Path,
    load: impl Fn(&str) -> Result<ServerScenario, String>,
) -> Result<(), String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let reader = RecordReader::new(std::io::BufReader::new(file))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let name = reader
        .header()
        .initial_state
        .as_deref()
        .map(|state| String::from_utf8_lossy(state).into_owned())
        .ok_or("the recording does not say its scenario")?;
    let scenario = load(&name)?;
    let replayer = Replayer::new(
        reader,
        |_| StrategyLogic::new(scenario, true, saves.to_path_buf()),
        Instant::now(),
    );
    let config = SpectateConfig {
        scope,
        port,
        speed,
        follow,
        ..SpectateConfig::default()
    };
    let report = spectate(replayer, config, |addr| {
        println!(
            "replaying {}: watch with strategy --join 127.0.0.1:{}",
            path.display(),
            addr.port()
        );
    });
    match report {
        Ok(report) => {
            println!("{} inputs replayed, every output identical", report.inputs);
            Ok(())
        }
        Err(ReplayError::Diverged(divergence)) => Err(format!("diverged:\n{divergence}")),
        Err(err) => Err(err.to_string()),
    }
}
