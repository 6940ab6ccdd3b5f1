//! A game's checkpoint: its state at a completed turn and who plays which
//! nation, in `switchboard::scenario`'s format (magic `SWCK`), so that
//! another server process can resume the game from it
//! (`strategy --serve --redis URL --game NAME`).

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use switchboard::scenario::{self, ScenarioError};
use switchboard::{ClientId, Outbox};

use super::{Player, StrategyLogic};
use crate::scenario::{NationId, ServerScenario};

/// The checkpoint's magic.
pub const CHECKPOINT_MAGIC: [u8; 4] = *b"SWCK";
/// The checkpoint format this build writes and reads.
pub const CHECKPOINT_VERSION: u16 = 1;

#[derive(Serialize, Deserialize)]
struct Checkpoint {
    scenario: ServerScenario,
    players: Vec<Seated>,
    host: Option<ClientId>,
    started: bool,
}

#[derive(Serialize, Deserialize)]
struct Seated {
    client: ClientId,
    name: String,
    nation: Option<NationId>,
}

impl StrategyLogic {
    /// Queues the game's checkpoint (at the start and at each completed
    /// turn).
    pub(super) fn checkpoint(&self, out: &mut Outbox) {
        match self.checkpoint_bytes() {
            Ok(bytes) => out.checkpoint(bytes),
            Err(err) => tracing::warn!(%err, "no checkpoint"),
        }
    }

    /// The game's checkpoint now: what a new named game writes before it
    /// serves, so that it exists (and a replacement server can resume its
    /// lobby) from its first moment.
    pub fn checkpoint_bytes(&self) -> Result<Vec<u8>, ScenarioError> {
        let checkpoint = Checkpoint {
            scenario: self.scenario.clone(),
            players: self
                .players
                .iter()
                .map(|(client, p)| Seated {
                    client: *client,
                    name: p.name.clone(),
                    nation: p.nation,
                })
                .collect(),
            host: self.host,
            started: self.started,
        };
        scenario::to_bytes(CHECKPOINT_MAGIC, CHECKPOINT_VERSION, &checkpoint)
    }

    /// The game a checkpoint holds, resumed: the same turn, the same
    /// players on the same nations (each away until it reconnects, with
    /// its id, to this process). The turn starts afresh: orders given
    /// after the checkpoint are lost.
    pub fn resume(bytes: &[u8], save_dir: PathBuf) -> Result<Self, ScenarioError> {
        let checkpoint: Checkpoint =
            scenario::from_bytes(CHECKPOINT_MAGIC, CHECKPOINT_VERSION, bytes)?;
        checkpoint
            .scenario
            .validate()
            .map_err(ScenarioError::Invalid)?;
        let players = checkpoint
            .players
            .into_iter()
            .map(|seated| {
                let player = Player {
                    name: seated.name,
                    nation: seated.nation,
                    ready: true,
                    online: false,
                };
                (seated.client, player)
            })
            .collect();
        Ok(Self {
            scenario: checkpoint.scenario,
            players,
            host: checkpoint.host,
            ended: BTreeSet::new(),
            started: checkpoint.started,
            save_dir,
        })
    }
}
