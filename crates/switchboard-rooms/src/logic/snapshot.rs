//! The rooms as they stand, for a recording started while the server runs
//! (`GameLogic::snapshot`): every room with its members and entities, the
//! quotas' counters and the sync clock. Not in a directory (`--redis`):
//! there reservations are checked against the wall clock and the
//! service's key, which a replay cannot have.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchboard::record::clock;
use switchboard::session::ClientId;

use super::{Room, RoomLimits, RoomsLogic};
use crate::protocol::RoomId;

/// What is written of [`RoomsLogic`].
#[derive(Serialize, Deserialize)]
struct State {
    limits: RoomLimits,
    rooms: BTreeMap<RoomId, Room>,
    room_of: HashMap<ClientId, RoomId>,
    names: HashMap<ClientId, String>,
    next_room: u32,
    sync_interval: Duration,
    #[serde(with = "clock::option")]
    last_sync: Option<Instant>,
    rpcs: HashMap<ClientId, u32>,
    #[serde(with = "clock::option")]
    rpc_window: Option<Instant>,
    #[serde(with = "clock::option")]
    epoch: Option<Instant>,
}

impl RoomsLogic {
    pub(super) fn snapshot_at(&self, now: Instant) -> Result<Vec<u8>, String> {
        if self.directory.is_some() {
            return Err(
                "a rooms server in a directory (--redis) is not recorded: its reservations are checked against the wall clock and the service's key"
                    .into(),
            );
        }
        let state = State {
            limits: self.limits,
            rooms: self.rooms.clone(),
            room_of: self.room_of.clone(),
            names: self.names.clone(),
            next_room: self.next_room,
            sync_interval: self.sync_interval,
            last_sync: self.last_sync,
            rpcs: self.rpcs.clone(),
            rpc_window: self.rpc_window,
            epoch: self.epoch,
        };
        Ok(clock::encode_at(now, &state)?)
    }

    pub(super) fn restore_at(&mut self, bytes: &[u8], now: Instant) -> Result<(), String> {
        let state: State = clock::decode_at(now, bytes)?;
        *self = Self {
            limits: state.limits,
            rooms: state.rooms,
            room_of: state.room_of,
            names: state.names,
            next_room: state.next_room,
            sync_interval: state.sync_interval,
            last_sync: state.last_sync,
            rpcs: state.rpcs,
            rpc_window: state.rpc_window,
            epoch: state.epoch,
            ..Self::default()
        };
        Ok(())
    }
}
