//! Directory mode (`crate::directory`): the rooms published for the
//! service's matchmaker.

use super::*;

impl RoomsLogic {
    /// Directory mode (`docs/SCALING.md`): rooms are created and joined
    /// only with a matchmaker's reservation, room ids carry the process's
    /// number, and the rooms are published through `link`.
    pub fn with_directory(mut self, link: DirectoryLink) -> Self {
        self.directory = Some(link);
        self
    }

    /// Publishes the rooms when they changed, at most every
    /// [`PUBLISH_EVERY`](crate::directory::PUBLISH_EVERY).
    pub(super) fn publish(&mut self, now: std::time::Instant) {
        if self.directory.is_none()
            || self.published.as_ref().is_some_and(|(at, _)| {
                now.saturating_duration_since(*at) < crate::directory::PUBLISH_EVERY
            })
        {
            return;
        }
        let taken = self
            .directory
            .as_mut()
            .map(DirectoryLink::drain_taken)
            .unwrap_or_default();
        let snapshot = DirectorySnapshot {
            rooms: self
                .rooms
                .values()
                .map(|r| RoomRecord {
                    summary: Self::summary(r),
                    private: r.private,
                })
                .collect(),
            players: self.room_of.len(),
            taken,
        };
        if self
            .published
            .as_ref()
            .is_some_and(|(_, last)| *last == snapshot)
        {
            return;
        }
        if let Some(link) = &self.directory {
            link.publish(snapshot.clone());
        }
        self.published = Some((now, snapshot));
    }
}
