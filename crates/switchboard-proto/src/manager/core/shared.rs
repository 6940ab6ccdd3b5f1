//! Sessions shared with other processes (`ManagerConfig::shared_sessions`):
//! claiming a session this process does not hold, writing each change of
//! those it holds, keeping them alive, and letting go of those taken over
//! elsewhere. Without a shared store none of this runs.

use super::*;

impl<L: GameLogic> ManagerCore<L> {
    /// Queues a change for the shared store, when there is one.
    pub(super) fn share(&mut self, update: ShareUpdate) {
        if self.shared_sessions {
            self.actions.push(ManagerAction::Share(update));
        }
    }

    /// A resume of a session not held here: ask the store, and hold the
    /// hello until it answers.
    pub(super) fn claim(&mut self, peer: PeerId, hello: SessionHello, now: Instant) {
        let Some(resume) = hello.resume.clone() else {
            return;
        };
        if self.pending_claims >= self.config.max_pending_claims {
            let busy = "too many reconnects being looked up; retry shortly".to_string();
            return self.refuse(peer, &hello, Refusal::Unavailable(busy), now);
        }
        let Some(state) = self.peers.get_mut(&peer) else {
            return;
        };
        state.claiming = Some(hello);
        self.pending_claims += 1;
        let new_token = self.sessions.new_token();
        self.actions.push(ManagerAction::Claim {
            peer,
            client: resume.client,
            token: resume.token,
            new_token,
        });
    }

    pub(super) fn on_claimed(
        &mut self,
        peer: PeerId,
        client: ClientId,
        new_token: ReconnectToken,
        result: Result<Option<SharedSession>, ShareError>,
        now: Instant,
    ) {
        self.pending_claims = self.pending_claims.saturating_sub(1);
        let hello = self.peers.get_mut(&peer).and_then(|p| p.claiming.take());
        let Some(hello) = hello else {
            // The connection ended while the store answered: a session it
            // took over waits out its grace period in the store.
            if let Ok(Some(_)) = result {
                self.share(ShareUpdate::Offline { client });
            }
            return;
        };
        let shared = match result {
            Ok(Some(shared)) if shared.client == client && self.sessions.get(client).is_none() => {
                shared
            }
            Ok(_) => return self.refuse(peer, &hello, Refusal::UnknownSession, now),
            Err(err) => {
                // The store's own words (a Redis error, say) stay in the
                // server's log; the client gets a short, stable reason.
                let text = format!("{peer}: session store failed: {}", err.0);
                self.peer_log(peer, LogLevel::Warn, text, now);
                let why = "the session store did not answer; retry shortly".to_string();
                return self.refuse(peer, &hello, Refusal::Unavailable(why), now);
            }
        };
        match self.sessions.adopt(peer, &shared, new_token, now) {
            Ok(admission) => {
                let text = format!("{client} came back from another server ({peer})");
                self.peer_log(peer, LogLevel::Info, text, now);
                self.admitted(peer, admission, now);
            }
            Err(refusal) => {
                self.share(ShareUpdate::Offline { client });
                self.refuse(peer, &hello, refusal, now);
            }
        }
    }

    /// Other processes took these sessions over: they end here (the game
    /// hears them leave) and their connections here, if any, close.
    pub(super) fn on_moved_away(&mut self, clients: Vec<ClientId>) {
        let mut out = Outbox::default();
        for client in clients {
            let Some((session, peer)) = self.sessions.moved_away(client) else {
                continue;
            };
            if let Some(peer) = peer {
                if let Some(state) = self.peers.get_mut(&peer) {
                    state.client = None;
                    state.closing = true;
                }
                self.close(
                    peer,
                    CloseCode::REPLACED,
                    "your session moved to another server",
                );
            }
            let text = format!("{} moved to another server", session.id);
            tracing::info!(client = %session.id, "session moved to another server");
            self.log(LogLevel::Info, text);
            self.leave_game(session.id, &mut out);
        }
        self.dispatch(out);
    }

    /// Every third of the grace period, the online sessions are written
    /// again: their lease in the store is renewed (so a dead process's
    /// sessions outlive it by at most one grace period), and a store that
    /// restarted empty gets them back.
    pub(super) fn refresh_shared(&mut self, now: Instant) {
        if !self.shared_sessions {
            return;
        }
        let every = self.config.sessions.grace_period / 3;
        if self
            .last_refresh
            .is_some_and(|t| now.saturating_duration_since(t) < every)
        {
            return;
        }
        self.last_refresh = Some(now);
        let mut online: Vec<_> = self.sessions.online().collect();
        online.sort_unstable_by_key(|(session, _)| session.id);
        let online: Vec<ShareUpdate> = online
            .into_iter()
            .map(|(session, token)| ShareUpdate::Online {
                session: SharedSession {
                    client: session.id,
                    name: session.name.clone(),
                    from: session.from,
                    reconnects: session.reconnects,
                },
                token: token.clone(),
            })
            .collect();
        for update in online {
            self.actions.push(ManagerAction::Share(update));
        }
    }
}
