//! What the core hands its driver: updates addressed to exactly their
//! audience (in id order), sends, closes, and log lines within each
//! address's share.

use super::*;

impl<L: GameLogic> ManagerCore<L> {
    /// Sends every update to exactly its audience.
    pub(super) fn dispatch(&mut self, mut out: Outbox) {
        for text in out.take_unsent() {
            tracing::warn!("{text}");
            self.log(LogLevel::Warn, text);
        }
        if let Some(state) = out.take_checkpoint() {
            if self.checkpoints {
                self.actions.push(ManagerAction::Checkpoint(state));
            }
        }
        for (audience, message) in out.take() {
            let peers: Vec<PeerId> = match &audience {
                Audience::One(client) => self
                    .sessions
                    .get(*client)
                    .and_then(|s| s.peer())
                    .into_iter()
                    .collect(),
                Audience::Only(list) => list
                    .iter()
                    .filter_map(|c| self.sessions.get(*c).and_then(|s| s.peer()))
                    .collect(),
                _ => {
                    let mut peers: Vec<PeerId> = self
                        .sessions
                        .iter()
                        .filter(|s| audience.includes(s.id))
                        .filter_map(|s| s.peer())
                        .collect();
                    peers.sort_unstable();
                    peers
                }
            };
            if !peers.is_empty() {
                self.actions
                    .push(ManagerAction::SendToMany { peers, message });
            }
        }
    }

    pub(super) fn send(&mut self, peer: PeerId, message: Message) {
        self.actions.push(ManagerAction::Send { peer, message });
    }

    pub(super) fn close(&mut self, peer: PeerId, code: CloseCode, reason: &str) {
        self.actions.push(ManagerAction::Close {
            peer,
            code,
            reason: reason.to_string(),
        });
    }

    pub(super) fn log(&mut self, level: LogLevel, text: String) {
        self.actions
            .push(ManagerAction::Log(LogEntry { level, text }));
    }

    /// A line about something `peer` did, for `tracing` and the operator's
    /// log, within its address's share (`ManagerRules::peer_log_rate`).
    pub(super) fn peer_log(&mut self, peer: PeerId, level: LogLevel, text: String, now: Instant) {
        let Some(addr) = self.peers.get(&peer).map(|p| p.addr) else {
            return;
        };
        self.addr_log(addr, level, text, now);
    }

    /// [`peer_log`](Self::peer_log) for a peer already gone.
    pub(super) fn addr_log(
        &mut self,
        addr: SocketAddr,
        level: LogLevel,
        mut text: String,
        now: Instant,
    ) {
        let Some(skipped) = self.peer_logs.admit(addr.ip(), now) else {
            return;
        };
        if skipped > 0 {
            text.push_str(&format!(
                " ({skipped} lines about peers skipped before this)"
            ));
        }
        match level {
            LogLevel::Info => tracing::info!(%addr, "{text}"),
            LogLevel::Warn => tracing::warn!(%addr, "{text}"),
        }
        self.log(level, text);
    }
}
