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
    pub fn capture(&self, now: Instant) -> Result<Snapshot, String> {
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
        let logic = logic?;
        Ok(Snapshot {
            reach_back,
            core: core?,
            logic,
        })
    }

    /// Puts a fresh core (no connection, no session yet) and its game where
    /// `snapshot` says, its instants counted from `now`.
    pub fn restore(&mut self, snapshot: &Snapshot, now: Instant) -> Result<(), String> {
        if !self.peers.is_empty() {
            return Err("a snapshot is restored into a fresh core".into());
        }
        let state: State = clock::decode_at(now, &snapshot.core)
            .map_err(|e| format!("the core's snapshot does not decode: {e}"))?;
        self.logic
            .restore(&snapshot.logic, now)
            .map_err(|e| format!("the game's snapshot: {e}"))?;
        self.sessions.restore(state.sessions)?;
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
    pub fn view_of(&mut self, client: ClientId, now: Instant) -> Result<Vec<Message>, String> {
        let saved = self.logic.snapshot(now)?;
        let mut out = Outbox::default();
        self.logic.on_reconnect(client, &mut out);
        self.logic.restore(&saved, now)?;
        Ok(out
            .take()
            .into_iter()
            .filter(|(audience, _)| audience.includes(client))
            .map(|(_, message)| message)
            .collect())
    }
}
