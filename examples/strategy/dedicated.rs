//! The dedicated server (`--serve`): no local player, a lobby; with
//! `--redis`, sessions shared and, for a named game, its lease and
//! checkpoints, so the game outlives this process (`docs/SCALING.md`).

use std::io::Write;

use super::{listing, load_scenario, quic, websocket, where_to_join, Options};
use strategy::rules;

/// A dedicated server: no local player, a lobby, on `--bind`; stops on
/// Ctrl-C or SIGTERM.
pub(super) fn serve(options: &Options) -> Result<(), String> {
    switchboard::process::init_stderr_logging();
    let scenario = load_scenario(&options.scenario)?;
    let mut config = config(options);
    config.record = options
        .record
        .as_ref()
        .map(|path| switchboard::manager::RecordConfig {
            initial_state: Some(strategy::replay::initial_state(&options.scenario)),
            ..switchboard::manager::RecordConfig::to(path)
        });
    let mut logic = rules::StrategyLogic::new(scenario, true, options.saves.clone());
    let mut lease = None;
    if let Some(url) = &options.redis {
        let start = if options.new_game {
            Start::New
        } else {
            Start::Resume
        };
        let game = options.game.as_deref().map(|name| (name, start));
        let shared = share_through_redis(options, url, &mut config, &logic, game)?;
        if let Some(resumed) = shared.resumed {
            logic = resumed;
        }
        lease = shared.lease;
    }
    println!("dedicated strategy server; Ctrl-C stops it. Its port is in the ready line:");
    let (scope, port) = (options.bind, options.port);
    let held = lease.clone();
    let served = switchboard::ServerManager::builder(logic)
        .config(config)
        .bind(scope)
        .port(port)
        .on_start(|handle| {
            // After the ready line, whoever started the server may have
            // stopped reading: a closed stdout is not the server's failure.
            let mut out = std::io::stdout();
            let _ = writeln!(out, "{}", where_to_join(scope, handle.local_addr().port()));
            if let Some(addr) = handle.websocket_addr() {
                let _ = writeln!(out, "WebSocket clients: ws://{addr}/");
            }
            if let Some(addr) = handle.quic_addr() {
                let _ = writeln!(out, "QUIC clients: quic://{addr}");
            }
            if let Some(lease) = held {
                // Another server took the game over (this one was cut off):
                // stop serving it.
                let handle = handle.clone();
                lease.keep(move || handle.shutdown());
            }
        })
        .run()
        .map(drop)
        .map_err(|e| format!("server: {e}"));
    if let Some(lease) = lease {
        release(lease);
    }
    served
}

/// A clean stop: the game's lease released, so that a waiting server (or
/// the next one a fleet allocates) takes the game over at once.
pub(super) fn release(lease: switchboard_redis::GameLease) {
    let released = switchboard::runtime::handle().block_on(lease.release());
    if let Err(err) = released {
        tracing::warn!(%err, "the game's lease was not released: it lapses by itself");
    }
}

/// A dedicated server's manager: the join password, the masters it is
/// listed on, its WebSocket and QUIC ports.
pub(super) fn config(options: &Options) -> switchboard::ManagerConfig {
    let mut config = switchboard::ManagerConfig {
        rules: switchboard::ManagerRules {
            password: options.password.clone(),
            ..Default::default()
        },
        listing: (!options.masters.is_empty()).then(|| listing(options, true).hook()),
        ..switchboard::ManagerConfig::default()
    };
    config.server.websocket = websocket(options);
    config.server.quic = quic(options);
    config
}

/// What a server sharing through Redis has: the game a checkpoint holds,
/// and a named game's lease.
pub(super) struct RedisGame {
    pub(super) resumed: Option<rules::StrategyLogic>,
    pub(super) lease: Option<switchboard_redis::GameLease>,
}

/// Whether a named game is started, resumed, or either, whichever Redis
/// says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    /// A new game (`--new-game`): refused if Redis holds it.
    New,
    /// Its checkpoint: refused if Redis holds none.
    Resume,
    /// Its checkpoint if Redis holds one, else a new game (a fleet's
    /// match, `fleet.rs`).
    #[cfg_attr(not(feature = "agones"), allow(dead_code))]
    Either,
}

/// Sessions (and, for a named game, its lease and checkpoints) in Redis.
/// A named game is served by one server at a time: this one waits for the
/// game's lease, then resumes the game from its checkpoint, or starts it
/// (writing its first checkpoint at once), as `game`'s [`Start`] says.
pub(super) fn share_through_redis(
    options: &Options,
    url: &str,
    config: &mut switchboard::ManagerConfig,
    fresh: &rules::StrategyLogic,
    game: Option<(&str, Start)>,
) -> Result<RedisGame, String> {
    use switchboard::manager::{CheckpointHook, SharedSessionsHook};
    use switchboard_redis::{GameLease, RedisConfig, RedisSessions, RedisStore};
    let store = RedisStore::open(RedisConfig {
        url: url.into(),
        ..RedisConfig::default()
    })
    .map_err(|e| e.to_string())?;
    config.shared_sessions = Some(SharedSessionsHook::new(RedisSessions::new(store.clone())));
    let Some((game, start)) = game else {
        return Ok(RedisGame {
            resumed: None,
            lease: None,
        });
    };
    let runtime = switchboard::runtime::handle();
    let ttl = std::time::Duration::from_millis(options.lease_ms.max(100));
    let lease = runtime
        .block_on(GameLease::acquire(&store, game, ttl, || {
            println!("game {game} is served by another server: waiting for its lease to lapse or be released");
        }))
        .map_err(|e| format!("cannot take game {game}'s lease: {e}"))?;
    let give_up = |why: String| {
        let _ = runtime.block_on(lease.release());
        Err(why)
    };
    let saved = match runtime.block_on(lease.load()) {
        Ok(saved) => saved,
        Err(e) => return give_up(format!("cannot read game {game}'s checkpoint: {e}")),
    };
    let resumed = match (saved, start) {
        (Some(_), Start::New) => {
            return give_up(format!(
                "game {game} exists already: resume it without --new-game, or pick another name"
            ))
        }
        (None, Start::Resume) => {
            return give_up(format!(
                "game {game} not found: Redis holds no checkpoint of it (start it with --new-game)"
            ))
        }
        (None, Start::New | Start::Either) => {
            let first = fresh.checkpoint_bytes().map_err(|e| e.to_string())?;
            if let Err(e) = runtime.block_on(lease.save_checkpoint(first)) {
                return give_up(format!("cannot write game {game}'s first checkpoint: {e}"));
            }
            println!("new game {game}");
            None
        }
        (Some(bytes), Start::Resume | Start::Either) => {
            let logic = match rules::StrategyLogic::resume(&bytes, options.saves.clone()) {
                Ok(logic) => logic,
                Err(e) => return give_up(format!("game {game}'s checkpoint: {e}")),
            };
            println!("resuming game {game} from its last checkpoint");
            Some(logic)
        }
    };
    config.checkpoints = Some(CheckpointHook::new(lease.clone()));
    Ok(RedisGame {
        resumed,
        lease: Some(lease),
    })
}
