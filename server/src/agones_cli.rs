//! `--agones`: every dedicated mode as an Agones game server
//! (`switchboard_agones`, docs/DEPLOY.md): connected to the sidecar before
//! it listens (a clear error without one), Ready once it listens, Health
//! while its own loop answers, players (and rooms) reported, Shutdown when
//! the match is over, after which it stops as on SIGTERM.

pub(crate) use switchboard_agones::AgonesArgs;
use switchboard_agones::{Agones, Event, Report, Running};

/// Why the server's life on Agones failed (Ready refused), kept for the
/// exit status: the server stops, and exits 1 saying why.
#[derive(Debug, Clone, Default)]
pub(crate) struct Failure(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl Failure {
    fn set(&self, err: &switchboard_agones::AgonesError) {
        tracing::error!(%err, "Agones: stopping");
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(err.to_string());
    }

    /// `ran`, unless the life on Agones failed.
    pub(crate) fn or(&self, ran: Result<(), String>) -> Result<(), String> {
        match self.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(err) => Err(err),
            None => ran,
        }
    }
}

/// What a manager's probe reports beside its players: its rooms, for a
/// rooms server.
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
    failure: Failure,
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
        on_event(failure, move |reason| stopped.shutdown_with(reason)),
    )
}

/// Runs a relay's life on Agones: its probe is the relay's own stats
/// (answered by its loop), players counted; the match over, `over` is
/// notified and the relay stops.
pub(crate) fn serve_relay(
    agones: Agones,
    relay: &switchboard_relay::RelayHandle,
    over: &std::sync::Arc<tokio::sync::Notify>,
    failure: Failure,
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
        on_event(failure, move |_| over.notify_one()),
    )
}

/// What a server that runs its match as it is does on each event: logs
/// an allocation; stops, telling its players `reason`, at Shutdown or when
/// Ready was refused (kept in `failure`).
fn on_event(failure: Failure, stop: impl Fn(&str) + Send + 'static) -> impl FnMut(Event) + Send {
    move |event| match event {
        Event::Shutdown => stop("the match is over"),
        Event::Failed(err) => {
            failure.set(&err);
            stop("the server could not join its fleet");
        }
        Event::Allocated(allocation) => tracing::info!(?allocation, "allocated to a match"),
        _ => {}
    }
}
