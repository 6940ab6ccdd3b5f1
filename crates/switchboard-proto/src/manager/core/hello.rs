//! Admission: a hello becomes a new session, a resumed one, or a refusal.

use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::limits::address_key;
use crate::session::{checked_name, MAX_NAME_CHARS};

impl<L: GameLogic> ManagerCore<L> {
    pub(super) fn on_hello(&mut self, peer: PeerId, hello: SessionHello, now: Instant) {
        if self.peers.get(&peer).is_some_and(|p| p.claiming.is_some()) {
            let detail = "a hello of this connection is already being answered".into();
            return self.error_reply(peer, 0, ErrorCode::UnknownSessionAction, detail, now);
        }
        let admission = match &hello.resume {
            Some(resume) => match self
                .sessions
                .resume(peer, resume.client, &resume.token, now)
            {
                // Perhaps another process held it: ask the shared store.
                Err(Refusal::UnknownSession) if self.shared_sessions => {
                    return self.claim(peer, hello, now)
                }
                other => other,
            },
            None => self.admit(peer, &hello, now),
        };
        match admission {
            Ok(admission) => self.admitted(peer, admission, now),
            Err(refusal) => self.refuse(peer, &hello, refusal, now),
        }
    }

    /// Welcomes the client `admission` admitted on `peer`, and tells the
    /// game (and the shared store, if any).
    pub(super) fn admitted(&mut self, peer: PeerId, admission: Admission, now: Instant) {
        if let Some(state) = self.peers.get_mut(&peer) {
            state.client = Some(admission.client);
        }
        if let Some(old) = admission.replaced {
            self.close(
                old,
                CloseCode::REPLACED,
                "replaced by a new connection of the same client",
            );
            if let Some(old_state) = self.peers.get_mut(&old) {
                old_state.client = None;
            }
        }
        let welcome = Welcome {
            client: admission.client,
            token: admission.token,
            resumed: admission.resumed,
            grace_secs: self
                .config
                .sessions
                .grace_period
                .as_secs()
                .min(u32::MAX as u64) as u32,
        };
        self.send(peer, protocol::session_message(protocol::WELCOME, &welcome));
        let mut out = Outbox::default();
        let client = admission.client;
        if let Some(session) = self.sessions.get(client) {
            let session = SharedSession {
                client,
                name: session.name.clone(),
                from: session.from,
                reconnects: session.reconnects,
            };
            let token = welcome.token.clone();
            self.share(ShareUpdate::Online { session, token });
        }
        if let Some(gone) = admission.evicted {
            self.share(ShareUpdate::Gone { client: gone });
            // Its grace period ends early: a live newcomer needed the room.
            self.stats.evicted_total += 1;
            let text = format!("{gone}, offline, gave way to a newcomer ({peer})");
            self.peer_log(peer, LogLevel::Info, text, now);
            self.leave_game(gone, &mut out);
        }
        if admission.resumed {
            self.stats.resumes_total += 1;
            let text = format!("{client} is back ({peer})");
            self.peer_log(peer, LogLevel::Info, text, now);
            self.logic.on_reconnect(client, &mut out);
        } else {
            self.stats.joins_total += 1;
            // The name as the session keeps it: trimmed and checked once.
            let name = self
                .sessions
                .get(client)
                .map(|s| s.name.clone())
                .unwrap_or_default();
            let shown = name.escape_debug().to_string();
            let text = format!("{client} joined as \"{shown}\" ({peer})");
            self.peer_log(peer, LogLevel::Info, text, now);
            self.logic.on_join(client, &name, &mut out);
        }
        self.dispatch(out);
    }

    fn admit(
        &mut self,
        peer: PeerId,
        hello: &SessionHello,
        now: Instant,
    ) -> Result<Admission, Refusal> {
        let name =
            checked_name(&hello.name).map_err(|why| Refusal::InvalidName(why.to_string()))?;
        let from = self.peers.get(&peer).map(|p| p.addr.ip());
        let from = address_key(from.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
        if let Some(expected) = &self.config.password {
            // A guesser waits longer after every wrong password, and is not
            // even checked meanwhile.
            let wait = self.password_failures.wait(from, now);
            if !wait.is_zero() {
                return Err(Refusal::Throttled(wait));
            }
            let given = hello.password.as_deref().unwrap_or("");
            if !bool::from(given.as_bytes().ct_eq(expected.as_bytes())) {
                self.password_failures.failed(from, now);
                return Err(Refusal::WrongPassword);
            }
            self.password_failures.succeeded(from);
        }
        let join = JoinRequest {
            name,
            credentials: &hello.credentials,
            addr: self.peers.get(&peer).map(|p| p.addr),
        };
        self.logic
            .authenticate(&join)
            .map_err(Refusal::NotAllowed)?;
        self.sessions.admit_new(peer, name, from, now)
    }

    pub(super) fn refuse(
        &mut self,
        peer: PeerId,
        hello: &SessionHello,
        refusal: Refusal,
        now: Instant,
    ) {
        self.stats.refused_total += 1;
        // As much of the name as a valid one could hold.
        let name: String = hello.name.chars().take(MAX_NAME_CHARS).collect();
        let name = name.escape_debug();
        let text = format!("{peer} (\"{name}\") refused: {refusal}");
        self.peer_log(peer, LogLevel::Warn, text, now);
        let refused = Refused {
            code: refusal.code(),
            reason: refusal.to_string(),
        };
        self.send(peer, protocol::session_message(protocol::REFUSED, &refused));
        self.close(peer, CloseCode::REFUSED, &refusal.to_string());
    }
}
