//! The game as it stands, for a recording started while it runs
//! (`GameLogic::snapshot`, `ManagerHandle::start_recording`): the scenario
//! (the map, every nation and unit, the turn), the players with their
//! nations, the host, who ended the turn, whether the game started. Where
//! saves go stays the replaying machine's own.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use switchboard::record::clock;
use switchboard::ClientId;

use super::{Player, StrategyLogic};
use crate::scenario::{NationId, ServerScenario};

#[derive(Serialize, Deserialize)]
struct State {
    scenario: ServerScenario,
    players: BTreeMap<ClientId, Player>,
    host: Option<ClientId>,
    ended: BTreeSet<NationId>,
    started: bool,
}

impl StrategyLogic {
    pub(super) fn snapshot_at(&self, now: Instant) -> Result<Vec<u8>, String> {
        let state = State {
            scenario: self.scenario.clone(),
            players: self.players.clone(),
            host: self.host,
            ended: self.ended.clone(),
            started: self.started,
        };
        Ok(clock::encode_at(now, &state)?)
    }

    pub(super) fn restore_at(&mut self, bytes: &[u8], now: Instant) -> Result<(), String> {
        let state: State = clock::decode_at(now, bytes)?;
        self.scenario = state.scenario;
        self.players = state.players;
        self.host = state.host;
        self.ended = state.ended;
        self.started = state.started;
        Ok(())
    }
}
