//! The rules of a game server's life on Agones, without IO: what to tell
//! the SDK server after each probe of the game server and each update of
//! its GameServer record. [`crate::Agones`] drives it over gRPC; tests drive
//! it in memory with instants they choose.
//!
//! ```text
//!   listening ──Ready──▶ Ready ──(Allocated by a GameServerAllocation,
//!                          │      or a first player: Allocate)──▶ Allocated
//!                          │                                          │
//!   every health interval: probe answered ──▶ Health, players, rooms  │
//!                          probe not answered ──▶ nothing (Agones      │
//!                          marks the server Unhealthy, restarts it)    │
//!                                                                     ▼
//!            the game ended, or empty for `empty_shutdown_after` ──▶ Shutdown
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use agones::GameServer;

use crate::AgonesConfig;

/// What a game server says of itself when probed (through its own loop,
/// so a stuck server answers nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The players connected now, by id.
    pub players: BTreeSet<String>,
    /// How many players are connected, when the server does not know them
    /// by id (a relay): counted in a Counter or a label, not listed.
    /// `None`: as many as `players`.
    pub player_count: Option<usize>,
    /// Rooms open now (a rooms server), if the server has rooms.
    pub rooms: Option<u64>,
    /// The most rooms the server opens, if it has rooms.
    pub rooms_capacity: Option<u64>,
    /// The game is over: the match ended, the server may go.
    pub ended: bool,
}

/// What a GameServerAllocation asked of this server, read from the labels
/// and annotations it set (annotations win where both say).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allocation {
    /// `switchboard.dev/game`: the game to run (a saved game's name, say).
    pub game: Option<String>,
    /// `switchboard.dev/scenario`: the scenario to start.
    pub scenario: Option<String>,
    /// `switchboard.dev/players`: how many players the match expects.
    pub players: Option<u32>,
    /// Every label and annotation of the GameServer, annotations last.
    pub metadata: BTreeMap<String, String>,
}

/// The label or annotation naming the game to run.
pub const GAME_KEY: &str = "switchboard.dev/game";
/// The label or annotation naming the scenario to start.
pub const SCENARIO_KEY: &str = "switchboard.dev/scenario";
/// The label or annotation giving the players the match expects.
pub const PLAYERS_KEY: &str = "switchboard.dev/players";

/// The List or Counter (in the Fleet's GameServer spec) players are
/// reported in; without either, a label `agones.dev/sdk-players`.
pub const PLAYERS: &str = "players";
/// The Counter (or label `agones.dev/sdk-rooms`) a rooms server reports its
/// open rooms in.
pub const ROOMS: &str = "rooms";

/// One call to the SDK server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// A health ping.
    Health,
    /// Mark the server Allocated (a player joined a server still Ready:
    /// the fleet must not scale it away under them).
    Allocate,
    /// Append a player to the `players` List.
    AddPlayer(String),
    /// Remove a player from the `players` List.
    RemovePlayer(String),
    /// Set a Counter's count.
    SetCounter(&'static str, i64),
    /// Set a Counter's capacity.
    SetCounterCapacity(&'static str, i64),
    /// Set a label (the SDK server prefixes it with `agones.dev/sdk-`).
    SetLabel(&'static str, String),
    /// The match is over: ask Agones to shut the server down.
    Shutdown,
}

/// Where a count goes: a List of ids, a Counter, or a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    List,
    Counter,
    Label,
}

/// A game server's life on Agones (see the module's diagram).
#[derive(Debug)]
pub struct Lifecycle {
    empty_shutdown_after: Option<Duration>,
    players_sink: Sink,
    rooms_sink: Sink,
    /// What the SDK server holds, as last told.
    players: BTreeSet<String>,
    player_count: Option<usize>,
    rooms: Option<u64>,
    rooms_capacity: Option<u64>,
    allocated: bool,
    /// Whether the allocation was told (once).
    allocation_told: bool,
    /// When the match began: allocated, or its first player joined.
    began: Option<Instant>,
    /// Since when the server has had no player after the match began.
    empty_since: Option<Instant>,
    shutdown: bool,
}

impl Lifecycle {
    /// The rules for a server whose GameServer record is `server` (its
    /// Lists and Counters decide where players and rooms are reported).
    pub fn new(config: &AgonesConfig, server: &GameServer) -> Self {
        let status = server.status.as_ref();
        let lists = status.map(|s| &s.lists);
        let counters = status.map(|s| &s.counters);
        let has_list = |name| lists.is_some_and(|l| l.contains_key(name));
        let has_counter = |name| counters.is_some_and(|c| c.contains_key(name));
        let players_sink = if has_list(PLAYERS) {
            Sink::List
        } else if has_counter(PLAYERS) {
            Sink::Counter
        } else {
            Sink::Label
        };
        let rooms_sink = if has_counter(ROOMS) {
            Sink::Counter
        } else {
            Sink::Label
        };
        // Players already in the List (a restarted process) are reconciled
        // from what the SDK server holds.
        let players = lists
            .and_then(|l| l.get(PLAYERS))
            .map(|l| l.values.iter().cloned().collect())
            .unwrap_or_default();
        // Allocated already: this process restarted during its match.
        let allocated = status.is_some_and(|s| s.state == "Allocated");
        Self {
            empty_shutdown_after: config.empty_shutdown_after,
            players_sink,
            rooms_sink,
            players,
            player_count: None,
            rooms: None,
            rooms_capacity: None,
            allocated,
            allocation_told: false,
            began: allocated.then(Instant::now),
            empty_since: None,
            shutdown: false,
        }
    }

    /// Whether the GameServer is Allocated (by Agones or by this server).
    pub fn is_allocated(&self) -> bool {
        self.allocated
    }

    /// Whether Shutdown was asked for.
    pub fn is_shut_down(&self) -> bool {
        self.shutdown
    }

    /// An update of the GameServer record (from WatchGameServer, or as it
    /// was at connect): the allocation it carries the first time it says
    /// Allocated.
    pub fn on_game_server(&mut self, now: Instant, server: &GameServer) -> Option<Allocation> {
        let state = server.status.as_ref().map(|s| s.state.as_str());
        if state != Some("Allocated") || self.allocation_told {
            return None;
        }
        self.allocated = true;
        self.allocation_told = true;
        self.began.get_or_insert(now);
        Some(allocation_of(server))
    }

    /// A health interval has passed; `report` is the server's answer to
    /// its probe, `None` when it did not answer in time. The calls to make,
    /// in order.
    pub fn on_tick(&mut self, now: Instant, report: Option<&Report>) -> Vec<Action> {
        // A server that does not answer gets no health: Agones restarts it.
        let Some(report) = report else {
            return Vec::new();
        };
        if self.shutdown {
            return Vec::new();
        }
        let mut actions = vec![Action::Health];
        let count = report.player_count.unwrap_or(report.players.len());
        let empty = count == 0;
        if !empty && !self.allocated {
            self.allocated = true;
            actions.push(Action::Allocate);
        }
        if !empty {
            self.began.get_or_insert(now);
        }
        self.report_players(&report.players, count, &mut actions);
        self.report_rooms(report, &mut actions);
        self.empty_since = match (empty, self.began) {
            (true, Some(_)) => self.empty_since.or(Some(now)),
            _ => None,
        };
        let empty_too_long = match (self.empty_since, self.empty_shutdown_after) {
            (Some(since), Some(after)) => now.saturating_duration_since(since) >= after,
            _ => false,
        };
        if report.ended || empty_too_long {
            self.shutdown = true;
            actions.push(Action::Shutdown);
        }
        actions
    }

    fn report_players(&mut self, now: &BTreeSet<String>, count: usize, actions: &mut Vec<Action>) {
        match self.players_sink {
            Sink::List => {
                for gone in self.players.difference(now) {
                    actions.push(Action::RemovePlayer(gone.clone()));
                }
                for new in now.difference(&self.players) {
                    actions.push(Action::AddPlayer(new.clone()));
                }
                self.players.clone_from(now);
            }
            sink => {
                if self.player_count != Some(count) {
                    self.player_count = Some(count);
                    actions.push(count_action(sink, PLAYERS, count as u64));
                }
            }
        }
    }

    fn report_rooms(&mut self, report: &Report, actions: &mut Vec<Action>) {
        if let Some(capacity) = report.rooms_capacity {
            if self.rooms_sink == Sink::Counter && self.rooms_capacity != Some(capacity) {
                actions.push(Action::SetCounterCapacity(ROOMS, clamp(capacity)));
            }
            self.rooms_capacity = Some(capacity);
        }
        if let Some(rooms) = report.rooms {
            if self.rooms != Some(rooms) {
                self.rooms = Some(rooms);
                actions.push(count_action(self.rooms_sink, ROOMS, rooms));
            }
        }
    }
}

fn count_action(sink: Sink, name: &'static str, count: u64) -> Action {
    match sink {
        Sink::Counter => Action::SetCounter(name, clamp(count)),
        _ => Action::SetLabel(name, count.to_string()),
    }
}

fn clamp(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// What an allocation asked for, from the GameServer's labels and
/// annotations.
pub fn allocation_of(server: &GameServer) -> Allocation {
    let mut metadata = BTreeMap::new();
    if let Some(meta) = &server.object_meta {
        extend(&mut metadata, &meta.labels);
        extend(&mut metadata, &meta.annotations);
    }
    let text = |key: &str| metadata.get(key).filter(|v| !v.is_empty()).cloned();
    Allocation {
        game: text(GAME_KEY),
        scenario: text(SCENARIO_KEY),
        players: text(PLAYERS_KEY).and_then(|v| v.trim().parse().ok()),
        metadata,
    }
}

fn extend(into: &mut BTreeMap<String, String>, from: &HashMap<String, String>) {
    into.extend(from.iter().map(|(k, v)| (k.clone(), v.clone())));
}

#[cfg(test)]
mod tests;
