//! The relay seen from its admin server (`switchboard_admin`): players,
//! zones, counters, and the operator's kick, notices and bots.

use std::sync::Mutex;

use switchboard::admin::BoxFuture;
use switchboard::admin::{AdminClient, AdminSource, Counter, LogLine, Snapshot, Traffic};

use crate::bots::{Bot, BotConfig, Script};
use crate::hub::Link;
use crate::server::RelayHandle;

/// A running relay as an [`AdminSource`], with the bots its operator
/// started.
#[derive(Debug)]
pub struct RelayAdmin {
    relay: RelayHandle,
    bots: Mutex<Bots>,
    /// Where recordings started from the admin page go.
    recordings: Option<std::path::PathBuf>,
}

/// The operator's bots: those running, and how many were ever started
/// (their names count on).
#[derive(Debug, Default)]
struct Bots {
    running: Vec<Bot>,
    started: usize,
}

impl RelayAdmin {
    /// The admin view of `relay`.
    pub fn new(relay: RelayHandle) -> Self {
        Self {
            relay,
            bots: Mutex::default(),
            recordings: None,
        }
    }

    /// Recordings started from the admin page go into `dir` (created when
    /// the first starts); without it the page's start button says there
    /// is nowhere to write.
    pub fn with_recordings(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.recordings = Some(dir.into());
        self
    }
}

/// The most bots the operator may have running at once.
pub const MAX_ADMIN_BOTS: usize = 2000;

/// A script by the name the admin API takes.
fn script(name: &str) -> Option<Script> {
    Some(match name {
        "" | "idle" => Script::Idle,
        "walk_to_player" => Script::WalkToPlayer,
        "circle" => Script::WalkCircle { radius: 20.0 },
        "square" => Script::WalkSquare { side: 30.0 },
        "follow" => Script::FollowPlayer,
        "jump" => Script::JumpLoop,
        "sneak" => Script::SneakToggle,
        "teleport" => Script::Teleport,
        "zone_hop" => Script::LeaveZoneAndReturn,
        _ => return None,
    })
}

/// What a client is, as the clients table says: `bot` for the operator's
/// own bots (in the relay's process), `native bot` or `json bot` for a
/// client that said it is one (the load tester's), else its link.
fn client_kind(client: &crate::hub::RelayClient, own_bot: bool) -> &'static str {
    match (own_bot, client.is_bot, client.link) {
        (true, _, _) => "bot",
        (false, true, Link::Native) => "native bot",
        (false, true, Link::Json) => "json bot",
        (false, false, Link::Native) => "native",
        (false, false, Link::Json) => "json",
    }
}

/// The names [`script`] takes.
const SCRIPTS: &str =
    "idle, walk_to_player, circle, square, follow, jump, sneak, teleport, zone_hop";

impl AdminSource for RelayAdmin {
    fn mode(&self) -> &'static str {
        "relay"
    }

    fn recording(&self) -> Option<switchboard::manager::RecordingStatus> {
        self.relay.recording()
    }

    fn stop_recording(&self) -> bool {
        self.relay.stop_recording()
    }

    fn start_recording(&self) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(switchboard::admin::start_recording_in(
            self.recordings.as_deref(),
            "relay",
            |path| self.relay.start_recording(path),
        ))
    }

    fn log(&self) -> Vec<LogLine> {
        self.relay
            .log()
            .into_iter()
            .map(|line| LogLine {
                at_seconds: line.at_seconds,
                level: line.level,
                text: line.text,
            })
            .collect()
    }

    fn snapshot(&self) -> BoxFuture<'_, Snapshot> {
        Box::pin(async move {
            let relay = &self.relay;
            let (clients, stats) = (relay.clients().await, relay.stats().await);
            let own: std::collections::HashSet<u32> = {
                let bots = self.bots.lock().expect("bots lock");
                bots.running.iter().filter_map(Bot::player_id).collect()
            };
            let clients = clients
                .into_iter()
                .map(|c| AdminClient {
                    id: c.id.to_string(),
                    kind: client_kind(&c, own.contains(&c.id)).to_string(),
                    name: c.name,
                    addr: c.addr.map(|a| a.to_string()),
                    place: c.zone,
                    // The relay counts what each player sends, not what it
                    // is sent (that would cost a count per recipient).
                    traffic: Some(Traffic {
                        messages_in: Some(c.relayed),
                        ..Traffic::default()
                    }),
                })
                .collect();
            let mut counters = vec![
                Counter::gauge(
                    "switchboard_relay_players",
                    "Players connected now.",
                    stats.players as f64,
                ),
                Counter::gauge(
                    "switchboard_relay_zones",
                    "Zones with a player in them now.",
                    stats.zones as f64,
                ),
                Counter::total(
                    "switchboard_relay_transforms_received_total",
                    "Transforms received from players.",
                    stats.transforms_in,
                ),
                Counter::total(
                    "switchboard_relay_deliveries_total",
                    "Transforms delivered, one per recipient.",
                    stats.transforms_out,
                ),
                Counter::total(
                    "switchboard_relay_refused_total",
                    "Transforms refused: over the rate or the limits.",
                    stats.refused,
                ),
                Counter::total(
                    "switchboard_relay_malformed_lines_total",
                    "JSON lines that were no use.",
                    stats.malformed_lines,
                ),
                Counter::total(
                    "switchboard_relay_view_recomputes_total",
                    "Views recomputed by interest by distance (moves past min_move; 0 without it).",
                    stats.view_recomputes,
                ),
            ];
            counters.extend(switchboard::admin::endpoint_counters(&relay.endpoint()));
            let waits = &stats.queue_wait;
            counters.extend(Counter::histogram_micros(
                "switchboard_relay_queue_wait_seconds",
                "How long the oldest message of each round waited for the relay to take it.",
                &crate::hub::QUEUE_WAIT_BOUNDS_MICROS,
                waits,
            ));
            // Places are the clients grouped by zone (the admin server
            // does it).
            Snapshot {
                clients,
                counters,
                places: Vec::new(),
            }
        })
    }

    fn kick(&self, id: String, reason: String) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            match id.parse::<u32>() {
                Ok(id) => self.relay.kick(id, &reason).await,
                Err(_) => false,
            }
        })
    }

    fn notice(&self, text: String) -> BoxFuture<'_, Result<usize, String>> {
        Box::pin(async move { Ok(self.relay.notice(&text).await) })
    }

    fn spawn_bots(
        &self,
        count: usize,
        script_name: String,
        place: Option<String>,
    ) -> BoxFuture<'_, Result<usize, String>> {
        Box::pin(async move {
            let script = script(&script_name)
                .ok_or_else(|| format!("no script {script_name:?}; scripts: {SCRIPTS}"))?;
            let mut bots = self.bots.lock().expect("bots lock");
            bots.running.retain(Bot::is_running);
            if bots.running.len() + count > MAX_ADMIN_BOTS {
                return Err(format!(
                    "{} bots run already; at most {MAX_ADMIN_BOTS}",
                    bots.running.len()
                ));
            }
            let zone = place.unwrap_or_else(|| "lobby".into());
            for _ in 0..count {
                bots.started += 1;
                // In the browser demo's world (100 × 75 units), where the
                // page draws them: around its middle, at a walking pace,
                // keeping distances that fit in it.
                let config = BotConfig {
                    start: [50.0 - 15.0, 0.0, 37.5 - 15.0],
                    speed: 20.0,
                    spacing: 5.0,
                    ..BotConfig::new(&format!("bot-{}", bots.started), &zone)
                };
                let bot = Bot::spawn(self.relay.native_addr(), config, script.clone());
                bots.running.push(bot);
            }
            Ok(count)
        })
    }

    fn remove_bots(&self) -> BoxFuture<'_, usize> {
        Box::pin(async move {
            let bots = std::mem::take(&mut self.bots.lock().expect("bots lock").running);
            for bot in &bots {
                bot.stop();
            }
            bots.len()
        })
    }
}
