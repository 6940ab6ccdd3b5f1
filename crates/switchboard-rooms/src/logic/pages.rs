//! Big rooms in pages: a late joiner's snapshot and each sync's updates are
//! cut into messages of about [`PAGE_BYTES`], so that no room, however full,
//! needs a frame past the codec's limit (and a joiner never gets nothing).

use super::*;

/// About the most entity state one message carries (64 KiB): well under
/// the codec's default frame limit of 1 MiB, with room for the ids.
pub const PAGE_BYTES: usize = 64 * 1024;

/// Bytes an entity adds to a page, near enough: its state, its kind and
/// the ids around them.
fn weight(entity: &Entity) -> usize {
    entity.state.len() + entity.kind.len() + 32
}

impl RoomsLogic {
    /// Sends `client` the whole room: a [`RoomState`] with the entities that
    /// fit one page, then the others as `Spawned` events, one message each
    /// (an entity's state is at most 16 KiB). `more_entities` in the state
    /// says how many follow.
    pub(super) fn send_state(&self, out: &mut Outbox, client: ClientId, room: &Room) {
        // The first page ends before the entity that would overfill it
        // (but holds one entity at least).
        let mut bytes = 0;
        let first_page = room
            .entities
            .values()
            .position(|entity| {
                bytes += weight(entity);
                bytes > PAGE_BYTES
            })
            .map_or(room.entities.len(), |end| end.max(1));
        let mut entities = room.entities.values();
        let state = RoomState {
            id: room.id,
            name: room.name.clone(),
            max_players: room.max_players,
            metadata: room.metadata.clone(),
            locked: room.locked,
            started: room.started,
            players: room.members.iter().map(|m| self.player(room, m)).collect(),
            entities: entities.by_ref().take(first_page).cloned().collect(),
            more_entities: (room.entities.len() - first_page) as u32,
        };
        out.send(Audience::One(client), RoomAction::State(state));
        for entity in entities {
            out.send(Audience::One(client), RoomAction::Spawned(entity.clone()));
        }
    }
}

/// Sends a room's changed entities to its members in pages of about
/// [`PAGE_BYTES`] (one `StateUpdate` each, stamped `server_time_ms`).
pub(super) fn send_updates(
    out: &mut Outbox,
    room: &Room,
    updates: Vec<EntityUpdate>,
    server_time_ms: u64,
) {
    let sync = |updates| {
        RoomAction::StateUpdate(StateSync {
            server_time_ms,
            updates,
        })
    };
    let mut page = Vec::new();
    let mut bytes = 0;
    for update in updates {
        let size = update.state.len() + 16;
        if bytes + size > PAGE_BYTES && !page.is_empty() {
            to_members(out, room, sync(std::mem::take(&mut page)));
            bytes = 0;
        }
        bytes += size;
        page.push(update);
    }
    if !page.is_empty() {
        to_members(out, room, sync(page));
    }
}
