//! `strategy --serve --agones` (feature `agones`): one match a game server
//! on an Agones fleet (`docs/DEPLOY.md`). Ready once it listens with the
//! default scenario; when a GameServerAllocation labels it with
//! `switchboard.dev/scenario`, it starts that game (a built-in scenario or
//! a save in `--saves`) on the same port; with `switchboard.dev/game` and
//! `--redis`, the named game: resumed from its last checkpoint if Redis
//! holds one (its server died), else started, checkpointed every turn, its
//! lease released when the server stops (SIGTERM). Players are reported by
//! id; the game won (or the server empty for `--agones-empty-shutdown`), it
//! asks Agones to shut it down and stops.

use std::io::Write;
use std::sync::{Arc, Mutex};

use strategy::rules::{self, WINNER_FACT};
use switchboard::ManagerHandle;
use switchboard_agones::{Agones, Allocation, Event, Report};

use super::dedicated::{release, share_through_redis, Start};
use super::{where_to_join, Options};

/// What the life on Agones asks of the server loop, and the server it
/// probes.
#[derive(Default)]
struct Shared {
    /// The manager serving now.
    current: Option<ManagerHandle>,
    /// The scenario it serves.
    scenario: String,
    /// The match an allocation asked for, to serve in place of this game.
    next: Option<Match>,
    /// Why the life on Agones failed (Ready refused): the exit's reason.
    failed: Option<String>,
    /// Shutdown was asked (or Ready refused): no further game.
    over: bool,
}

/// What an allocation asked the server to serve.
#[derive(Debug, Clone, Default)]
struct Match {
    /// The scenario (default: `--scenario`).
    scenario: Option<String>,
    /// The named game, kept in Redis.
    game: Option<String>,
}

/// Serves matches until Agones's Shutdown or a signal.
pub(super) fn serve(options: &Options, agones: Agones) -> Result<(), String> {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let mut agones = Some(agones);
    // The life on Agones, kept until the last game stops.
    let mut in_fleet = None;
    let mut serving = Match::default();
    let mut port = options.port;
    loop {
        let mut scenario = serving.scenario.clone().unwrap_or(options.scenario.clone());
        let loaded = match load(options, &scenario) {
            Ok(loaded) => loaded,
            // A label naming no scenario: the players still get a game.
            Err(err) if serving.scenario.is_some() => {
                tracing::error!(%err, "the match's scenario: serving the default one instead");
                scenario.clone_from(&options.scenario);
                load(options, &scenario)?
            }
            Err(err) => return Err(err),
        };
        let mut logic = rules::StrategyLogic::new(loaded, true, options.saves.clone());
        let mut config = super::dedicated::config(options);
        let mut lease = None;
        if serving.game.is_some() && options.redis.is_none() {
            tracing::warn!("the match names a game, but without --redis it is not kept");
        }
        if let (Some(url), Some(game)) = (&options.redis, &serving.game) {
            let start = Some((game.as_str(), Start::Either));
            let shared = share_through_redis(options, url, &mut config, &logic, start)?;
            logic = shared.resumed.unwrap_or(logic);
            lease = shared.lease;
        }
        lock(&shared).scenario.clone_from(&scenario);
        let held = lease.clone();
        let on_fleet = shared.clone();
        let first = &mut agones;
        let life = &mut in_fleet;
        let asked = port;
        let bound = &mut port;
        switchboard::ServerManager::builder(logic)
            .config(config)
            .bind(options.bind)
            .port(asked)
            .on_start(|handle| {
                *bound = handle.local_addr().port();
                let mut out = std::io::stdout();
                let _ = writeln!(out, "{}", where_to_join(options.bind, *bound));
                let over = {
                    let mut state = lock(&on_fleet);
                    state.current = Some(handle.clone());
                    state.over
                };
                if over {
                    // The match ended while this game was starting.
                    handle.shutdown_with("the match is over");
                }
                if let Some(lease) = held {
                    // Another server took the game over: stop serving it.
                    let handle = handle.clone();
                    lease.keep(move || handle.shutdown());
                }
                // Ready once, when the first server listens; the life on
                // Agones spans the restarts.
                if let Some(agones) = first.take() {
                    *life = Some(live(agones, on_fleet.clone()));
                }
            })
            .run()
            .map_err(|e| format!("server: {e}"))?;
        if let Some(lease) = lease {
            release(lease);
        }
        let mut state = lock(&shared);
        state.current = None;
        if state.over {
            return state.failed.take().map_or(Ok(()), Err);
        }
        match state.next.take() {
            Some(next) => {
                tracing::info!(?next, "serving the match");
                serving = next;
            }
            None => return state.failed.take().map_or(Ok(()), Err),
        }
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// A built-in scenario, or a save of `--saves` (never another path: the
/// name comes from an allocation's label).
fn load(options: &Options, name: &str) -> Result<strategy::scenario::ServerScenario, String> {
    if let Some(scenario) = strategy::scenario::builtin(name) {
        return Ok(scenario);
    }
    if name == options.scenario {
        return super::load_scenario(name);
    }
    rules::check_save_name(name)?;
    let path = options.saves.join(format!("{name}.swst"));
    strategy::scenario::ServerScenario::load(&path).map_err(|e| format!("{name}: {e}"))
}

/// The server's life on Agones: its probe is the serving manager's stats
/// (players by id, the game over once its place names a winner).
fn live(agones: Agones, shared: Arc<Mutex<Shared>>) -> switchboard_agones::Running {
    let probed = shared.clone();
    agones.serve(
        move || {
            let handle = lock(&probed).current.clone();
            async move {
                let stats = handle?.stats().await?;
                let won = |place: &switchboard::manager::Place| {
                    place
                        .facts
                        .iter()
                        .any(|(fact, value)| fact == WINNER_FACT && !value.is_empty())
                };
                Some(Report {
                    players: stats.clients.iter().map(|c| c.id.to_string()).collect(),
                    ended: stats.places.iter().any(won),
                    ..Report::default()
                })
            }
        },
        move |event| {
            let mut state = lock(&shared);
            let handle = state.current.clone();
            let stop = |reason: &str| {
                if let Some(handle) = &handle {
                    handle.shutdown_with(reason);
                }
            };
            match event {
                Event::Allocated(Allocation { scenario, game, .. })
                    if game.is_some()
                        || scenario.as_ref().is_some_and(|s| *s != state.scenario) =>
                {
                    state.next = Some(Match { scenario, game });
                    stop("the match's game is starting; join again");
                }
                Event::Allocated(allocation) => {
                    tracing::info!(?allocation, "allocated: the game as it is");
                }
                Event::Shutdown => {
                    state.over = true;
                    stop("the match is over");
                }
                Event::Failed(err) => {
                    tracing::error!(%err, "Agones: stopping");
                    state.failed = Some(err.to_string());
                    state.over = true;
                    stop("the server could not join its fleet");
                }
                _ => {}
            }
        },
    )
}
