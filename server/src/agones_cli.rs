//! `--agones`: every dedicated mode as an Agones game server
//! (`switchboard_agones`, docs/DEPLOY.md): connected to the sidecar before
//! it listens (a clear error without one), Ready once it listens, Health
//! while its own loop answers, players (and rooms) reported, Shutdown when
//! the match is over, after which it stops as on SIGTERM.

use std::time::Duration;

use clap::Args;
use switchboard_agones::{Agones, AgonesConfig, Event, Report, Running};

#[derive(Debug, Clone, Args)]
pub(crate) struct AgonesArgs {
    /// Run as an Agones game server: Ready once listening, Health every
    /// 2 s while the server answers, players reported, Shutdown when the
    /// match is over. Needs the Agones sidecar (AGONES_SDK_GRPC_PORT): fails
    /// at start without one.
    #[arg(long, env = "SWITCHBOARD_AGONES")]
    agones: bool,
    /// With --agones: seconds the server may stay without a player once its
    /// match began (allocated, or a first player) before it asks to shut
    /// down; 0: only when the game ends.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    agones_empty_shutdown: u64,
    /// With --agones: seconds to wait for the sidecar at start (it may
    /// start after the game server) before failing.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    agones_connect_secs: f64,
    /// With --agones: seconds between health pings (each sent only when
    /// the server answered its probe within that time). The Fleet's
    /// `health.periodSeconds` should be at least twice this.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    agones_health_secs: f64,
}

impl AgonesArgs {
    /// Connects to the sidecar when `--agones` was given: call before the
    /// server's runtime starts.
    pub(crate) fn connect(&self) -> Result<Option<Agones>, String> {
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

/// What a manager's probe reports beside its players: its rooms (a rooms
/// server) and whether its game is over.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ManagerReport {
    /// Rooms are the manager's places, at most this many.
    pub(crate) rooms_capacity: Option<u64>,
}

/// Runs a manager's life on Agones: its probe is the manager's own stats
/// (answered by its loop), players by id; the match over, it stops.
pub(crate) fn serve_manager(
    agones: Agones,
    handle: &switchboard::ManagerHandle,
    shape: ManagerReport,
) -> Running {
    let probed = handle.clone();
    let stopped = handle.clone();
    agones.serve(
        move || {
            let handle = probed.clone();
            async move {
                let stats = handle.stats().await?;
                Some(Report {
                    players: stats.clients.iter().map(|c| c.id.to_string()).collect(),
                    rooms: shape.rooms_capacity.map(|_| stats.places.len() as u64),
                    rooms_capacity: shape.rooms_capacity,
                    ..Report::default()
                })
            }
        },
        move |event| match event {
            Event::Shutdown => stopped.shutdown_with("the match is over"),
            Event::Failed(err) => {
                tracing::error!(%err, "Agones: stopping");
                stopped.shutdown_with("the server could not join its fleet");
            }
            Event::Allocated(allocation) => {
                tracing::info!(?allocation, "allocated to a match");
            }
            _ => {}
        },
    )
}

/// Runs a relay's life on Agones: its probe is the relay's own stats
/// (answered by its loop), players counted; the match over, `over` is
/// notified and the relay stops.
pub(crate) fn serve_relay(
    agones: Agones,
    relay: &switchboard_relay::RelayHandle,
    over: &std::sync::Arc<tokio::sync::Notify>,
) -> Running {
    let probed = relay.clone();
    let over = over.clone();
    agones.serve(
        move || {
            let relay = probed.clone();
            async move {
                let stats = relay.stats().await;
                Some(Report {
                    player_count: Some(stats.players),
                    ..Report::default()
                })
            }
        },
        move |event| match event {
            Event::Shutdown => over.notify_one(),
            Event::Failed(err) => {
                tracing::error!(%err, "Agones: stopping");
                over.notify_one();
            }
            Event::Allocated(allocation) => {
                tracing::info!(?allocation, "allocated to a match");
            }
            _ => {}
        },
    )
}
