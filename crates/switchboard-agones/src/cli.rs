//! `--agones` and its options, for every binary that serves on a fleet
//! (`switchboard-server`'s modes, the strategy game's `--serve`).

use std::time::Duration;

use crate::{Agones, AgonesConfig};

/// The command-line options of a game server on Agones (`clap`'s
/// `#[command(flatten)]`).
#[derive(Debug, Clone, clap::Args)]
pub struct AgonesArgs {
    /// Run as an Agones game server: Ready once listening, Health every
    /// 2 s while the server answers, players reported, Shutdown when the
    /// match is over. Needs the Agones sidecar (AGONES_SDK_GRPC_PORT): fails
    /// at start without one.
    #[arg(long, env = "SWITCHBOARD_AGONES")]
    pub agones: bool,
    /// With --agones: seconds the server may stay without a player once its
    /// match began (allocated, or a first player) before it asks to shut
    /// down; 0: only when the game ends.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub agones_empty_shutdown: u64,
    /// With --agones: seconds to wait for the sidecar at start (it may
    /// start after the game server) before failing.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub agones_connect_secs: f64,
    /// With --agones: seconds between health pings (each sent only when
    /// the server answered its probe within that time). The Fleet's
    /// `health.periodSeconds` should be at least twice this.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    pub agones_health_secs: f64,
}

impl AgonesArgs {
    /// Connects to the sidecar when `--agones` was given: call before the
    /// server's runtime starts.
    pub fn connect(&self) -> Result<Option<Agones>, String> {
        if !self.agones {
            return Ok(None);
        }
        let config = AgonesConfig {
            empty_shutdown_after: (self.agones_empty_shutdown > 0)
                .then(|| Duration::from_secs(self.agones_empty_shutdown)),
            connect_timeout: Duration::try_from_secs_f64(self.agones_connect_secs)
                .map_err(|_| "--agones-connect-secs: not a duration")?,
            health_interval: Duration::try_from_secs_f64(self.agones_health_secs)
                .ok()
                .filter(|d| *d >= Duration::from_millis(50))
                .ok_or("--agones-health-secs: 0.05 or more")?,
            ..AgonesConfig::default()
        };
        Agones::connect(config).map(Some).map_err(|e| e.to_string())
    }
}
