//! A datagram client's view: others' transforms arrive in any order, so
//! each player's newest is kept by the relay's clock; and compact view
//! datagrams (`RelayOptions::compact_datagrams`), read through the
//! connection's [`ViewDecoder`] and acknowledged.

use switchboard::message::{Action, Channel, Message};

use super::{Heard, RelayClientCore, RelayClientEvent};
use crate::server::{RelayAction, RelayMovesChannel};

/// A datagram client's view (`RelayOptions::datagrams`): others'
/// transforms come as they come, so each player's newest is kept by the
/// relay's clock, and a player who left is not brought back by one of its
/// transforms that was overtaken by its `Left`.
#[derive(Debug, Default)]
pub(super) struct View {
    /// Each player's newest transform's time, or the time it left at.
    newest: std::collections::HashMap<u32, u64>,
    /// The relay's clock in the newest batch read.
    now_ms: u64,
}

/// How long a player who left is remembered, and how old a transform may
/// be: nothing in flight is older.
pub(super) const VIEW_MEMORY_MS: u64 = 10_000;

/// Players remembered before those who left long ago are forgotten.
const VIEW_PRUNE_AT: usize = 4_096;

impl View {
    /// Whether a transform of `player` sent at `at` is newer than what the
    /// client has of it; it is kept as the newest if so.
    pub(super) fn take(&mut self, player: u32, at: u64) -> bool {
        if at.saturating_add(VIEW_MEMORY_MS) < self.now_ms {
            return false;
        }
        match self.newest.get_mut(&player) {
            Some(newest) if at <= *newest => false,
            Some(newest) => {
                *newest = at;
                true
            }
            None => {
                self.prune();
                self.newest.insert(player, at);
                true
            }
        }
    }

    /// `player` left when the relay's clock said `at`: its transforms sent
    /// before that are stale.
    pub(super) fn left(&mut self, player: u32, at: u64) {
        self.prune();
        self.newest.insert(player, at);
    }

    pub(super) fn clock(&mut self, at: u64) {
        self.now_ms = self.now_ms.max(at);
    }

    fn prune(&mut self) {
        if self.newest.len() >= VIEW_PRUNE_AT {
            let horizon = self.now_ms.saturating_sub(VIEW_MEMORY_MS);
            self.newest.retain(|_, at| *at >= horizon);
        }
    }
}

impl RelayClientCore {
    /// A `CompactView` datagram, through this connection's decoder: each
    /// transform newer than what the client has of its sender.
    pub(super) fn compact_view(
        &mut self,
        content: &[u8],
        each: &mut impl FnMut(RelayClientEvent<'_>),
    ) {
        let Some(decoder) = &mut self.compact_view else {
            each(RelayClientEvent::Broken(
                "compact view datagrams the client did not ask for".into(),
            ));
            return;
        };
        let view = &mut self.view;
        let read = decoder.read(content, |record| {
            if view.take(record.player_id, record.server_time_ms) {
                each(RelayClientEvent::Transform(Heard::Compact {
                    player_id: record.player_id,
                    server_time_ms: record.server_time_ms,
                    transform: record.transform,
                    extra_changed: record.extra_changed,
                }));
            }
        });
        match read {
            Ok(Some(frame)) => self.view.clock(frame.server_time_ms),
            Ok(None) => {}
            Err(err) => each(RelayClientEvent::Broken(err.to_string())),
        }
    }

    /// What to tell the relay of the compact view datagrams read since the
    /// last time: send it as it is, just **before** your next move (both go
    /// on the moves channel, where the newest wins: a move sent first could
    /// be dropped if the acknowledgement overtook it), or once a frame. The
    /// relay writes the next ones against them. `None`: nothing to say, or
    /// no compact view.
    pub fn view_ack(&mut self) -> Option<Message> {
        let ack = self.compact_view.as_mut()?.ack()?;
        Some(Message::from_raw(
            RelayMovesChannel.id(),
            RelayAction::ViewAck.id(),
            ack.encode().into(),
        ))
    }
}
