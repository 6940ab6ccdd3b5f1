//! The core and its game as they stand at one moment ([`Snapshot`]): what a
//! recording started mid-game begins with, so that its replay starts from
//! the same sessions, connections, rate limits and timers as the recorded
//! run, and the same game. The operator's counters (`ServerStats`) and the
//! log's limits are not in it: they decide no output.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{ManagerCore, Peer};
use crate::limits::Backoff;
use crate::manager::logic::{GameLogic, Outbox};
use crate::message::{Message, PeerId};
use crate::record::clock;
use crate::session::{ClientId, Session};

/// The core and its game at one moment (see the module's text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// How far before the snapshot's moment its earliest instant lies: a
    /// replay starts its clock that much after its own start, so that no
    /// instant falls before the replaying machine's clock began.
    pub reach_back: Duration,
    /// The core's state, its instants as offsets from the moment.
    pub core: Vec<u8>,
    /// The game's ([`GameLogic::snapshot`]).
    pub logic: Vec<u8>,
}

/// Why the core and its game could not be captured or put back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The game took no snapshot, or refused one ([`GameLogic::snapshot`],
    /// [`GameLogic::restore`]), in its own words.
    #[error("the game's snapshot: {0}")]
    Game(String),
    /// The core's own state did not encode, or does not decode (another
    /// build wrote it).
    #[error("the core's snapshot: {0}")]
    Core(crate::codec::ContentError),
    /// A snapshot is put back only into a fresh core (no connection yet).
    #[error("a snapshot is restored into a fresh core")]
    NotFresh,
    /// The sessions it holds do not fit the session table's rules.
    #[error("the snapshot's sessions: {0}")]
    Sessions(String),
}

/// What is written of the core (and read back: [`State`], field for field).
#[derive(Serialize)]
struct StateRef<'a> {
    sessions: Vec<Session>,
    peers: Vec<(PeerId, &'a Peer)>,
    password_failures: &'a Backoff,
    #[serde(with = "clock::option")]
    last_latency: Option<Instant>,
    #[serde(with = "clock::option")]
    last_refresh: Option<Instant>,
    pending_claims: usize,
}

#[derive(Deserialize)]
struct State {
    sessions: Vec<Session>,
    peers: VecDeque<(PeerId, Peer)>,
    password_failures: Backoff,
    #[serde(with = "clock::option")]
    last_latency: Option<Instant>,
    #[serde(with = "clock::option")]
    last_refresh: Option<Instant>,
    pending_claims: usize,
}

impl<L: GameLogic> ManagerCore<L> {
    /// The core and its game as they stand at `now` (between two calls: no
    /// action is waiting). Refused, with why, when the game takes none
    /// ([`GameLogic::snapshot`]).
    pub fn capture(&self, now: Instant) -> Result<Snapshot, SnapshotError> {
        let mut peers: Vec<(PeerId, &Peer)> =
            self.peers.iter().map(|(p, peer)| (*p, peer)).collect();
        peers.sort_by_key(|(peer, _)| *peer);
        let state = StateRef {
            sessions: self.sessions.sessions(),
            peers,
            password_failures: &self.password_failures,
            last_latency: self.last_latency,
            last_refresh: self.last_refresh,
            pending_claims: self.pending_claims,
        };
        let ((core, logic), reach_back) =
            clock::reach_of(|| (clock::encode_at(now, &state), self.logic.snapshot(now)));
        let logic = logic.map_err(SnapshotError::Game)?;
        Ok(Snapshot {
            reach_back,
            core: core.map_err(SnapshotError::Core)?,
            logic,
        })
    }

    /// Puts a fresh core (no connection, no session yet) and its game where
    /// `snapshot` says, its instants counted from `now`.
    pub fn restore(&mut self, snapshot: &Snapshot, now: Instant) -> Result<(), SnapshotError> {
        if !self.peers.is_empty() {
            return Err(SnapshotError::NotFresh);
        }
        let state: State = clock::decode_at(now, &snapshot.core).map_err(SnapshotError::Core)?;
        self.logic
            .restore(&snapshot.logic, now)
            .map_err(SnapshotError::Game)?;
        self.sessions
            .restore(state.sessions)
            .map_err(SnapshotError::Sessions)?;
        self.peers = state.peers.into_iter().collect();
        self.password_failures = state.password_failures;
        self.last_latency = state.last_latency;
        self.last_refresh = state.last_refresh;
        self.pending_claims = state.pending_claims;
        Ok(())
    }

    /// The welcomed clients connected now, longest connected first: each
    /// one's connection, id and name (a spectator of a recording that
    /// starts from a snapshot follows one of them).
    pub fn connected(&self) -> Vec<(PeerId, ClientId, String)> {
        let mut connected: Vec<(Instant, PeerId, ClientId)> = self
            .peers
            .iter()
            .filter_map(|(peer, state)| Some((state.connected_at, *peer, state.client?)))
            .collect();
        connected.sort();
        connected
            .into_iter()
            .map(|(_, peer, client)| {
                let name = self.sessions.get(client).map(|s| s.name.clone());
                (peer, client, name.unwrap_or_default())
            })
            .collect()
    }

    /// What the game would send `client` coming back now
    /// ([`GameLogic::on_reconnect`]: in most games, everything it needs to
    /// draw the game), the game unchanged: it is captured before and put
    /// back after ([`GameLogic::snapshot`], [`GameLogic::restore`]), so
    /// this needs a game that takes snapshots, and what its snapshot leaves
    /// out is as its restore leaves it.
    pub fn view_of(
        &mut self,
        client: ClientId,
        now: Instant,
    ) -> Result<Vec<Message>, SnapshotError> {
        let saved = self.logic.snapshot(now).map_err(SnapshotError::Game)?;
        let mut out = Outbox::default();
        self.logic.on_reconnect(client, &mut out);
        self.logic
            .restore(&saved, now)
            .map_err(SnapshotError::Game)?;
        Ok(out
            .take()
            .into_iter()
            .filter(|(audience, _)| audience.includes(client))
            .map(|(_, message)| message)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entropy::Seeded;
    use crate::manager::config::ManagerRules;
    use crate::manager::logic::{Rejection, Request};

    /// A game whose snapshot is its one number, or none at all.
    struct Counter(Option<u8>);

    impl GameLogic for Counter {
        type Message = Message;
        type Command = ();
        fn validate(&self, _: &Request) -> Result<(), Rejection> {
            Ok(())
        }
        fn apply(&mut self, _: ClientId, _: (), _: &mut Outbox) {}
        fn snapshot(&self, _: Instant) -> Result<Vec<u8>, String> {
            self.0.map(|n| vec![n]).ok_or_else(|| "takes none".into())
        }
        fn restore(&mut self, state: &[u8], _: Instant) -> Result<(), String> {
            self.0 = Some(*state.first().ok_or("empty")?);
            Ok(())
        }
    }

    fn core(game: Option<u8>) -> ManagerCore<Counter> {
        ManagerCore::new(
            ManagerRules::default(),
            Counter(game),
            Box::new(Seeded::new(1)),
        )
    }

    #[test]
    fn a_snapshot_puts_the_game_back_and_each_refusal_says_which_part_refused() {
        let now = Instant::now();
        let snapshot = core(Some(7)).capture(now).unwrap();
        let mut fresh = core(Some(0));
        fresh.restore(&snapshot, now).unwrap();
        assert_eq!(fresh.logic.0, Some(7));

        assert_eq!(
            core(None).capture(now),
            Err(SnapshotError::Game("takes none".into()))
        );
        let broken = Snapshot {
            core: vec![0xff; 3],
            ..snapshot.clone()
        };
        assert!(matches!(
            core(Some(0)).restore(&broken, now),
            Err(SnapshotError::Core(_))
        ));
        let no_game = Snapshot {
            logic: Vec::new(),
            ..snapshot
        };
        assert_eq!(
            core(Some(0)).restore(&no_game, now),
            Err(SnapshotError::Game("empty".into()))
        );
    }
}
