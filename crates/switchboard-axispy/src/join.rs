//! The join: an AxisPy id claimed (section 5.10's rules), its Switchboard
//! session opened or resumed, its room found by name and joined or
//! created.

use std::time::Instant;

use serde_json::{json, Value};
use switchboard::manager::protocol::{self as session, Resume, SessionHello, Welcome};
use switchboard::message::SESSION_CHANNEL;
use switchboard::socket::{CloseCode, SocketConfig, SocketStream};
use switchboard::ClientId;
use tokio::sync::oneshot;

use super::bridge::{axispy_reason, Bridge, End, Me};
use super::directory::Claim;
use super::wire::{self, Incoming};
use switchboard_rooms::protocol::{CreateRoom, RoomAction, RoomState};
use switchboard_rooms::RoomEvent;

impl Bridge {
    /// `join_request`: claim the id, open or resume its session, find or
    /// create the room, join it.
    pub(super) async fn join(&mut self, message: Incoming) -> Result<(), End> {
        let id = message
            .d
            .get("player_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = message
            .d
            .get("player_name")
            .and_then(Value::as_str)
            .unwrap_or("Player");
        if !wire::is_player_id(id) {
            return self.refuse("invalid player id").await;
        }
        let (id, name) = (id.to_string(), name.to_string());
        let claim = {
            let mut directory = self.shared.directory.lock().expect("directory lock");
            directory.claim(&id, &self.ask.name, self.addr.ip(), Instant::now())
        };
        let claim = match claim {
            Claim::Free(claim) => claim,
            Claim::Kicked => return self.refuse("kicked").await,
            Claim::Foreign => return self.refuse("duplicate player id").await,
            Claim::Taken(refusal) => return self.refuse(&refusal.to_string()).await,
            Claim::Full => return self.refuse("server full").await,
            Claim::AddressFull => return self.refuse("too many players from your address").await,
            Claim::Held(probe) => {
                // The id's connection may be half-open: ask it, and take
                // the id over only if it does not answer.
                // A connection that cannot even answer in time (gone, or
                // stuck writing to a client that does not read) is dead.
                let (tx, rx) = oneshot::channel();
                let answer = tokio::time::timeout(self.shared.config.probe_timeout * 2, async {
                    probe.send(tx).await.ok()?;
                    rx.await.ok()
                });
                let alive = answer.await.ok().flatten().unwrap_or(false);
                if alive {
                    return self.refuse("duplicate player id").await;
                }
                None
            }
        };
        let bound = self.shared.directory.lock().expect("directory lock").bind(
            &id,
            self.addr.ip(),
            self.conn,
            self.probe_tx.clone(),
            claim,
        );
        if !bound {
            return self.refuse("duplicate player id").await;
        }
        let joined = tokio::time::timeout(
            self.shared.config.join_timeout,
            self.open_session(&id, &name),
        )
        .await;
        match joined {
            Ok(Ok((client, state, resumed))) => {
                self.me = Some(Me {
                    id: id.clone(),
                    client,
                    room: self.ask.name.clone(),
                });
                self.accepted(&id, state, resumed).await;
                Ok(())
            }
            Ok(Err(reason)) => {
                self.unbind(&id);
                self.refuse(&reason).await
            }
            Err(_) => {
                self.unbind(&id);
                self.refuse("the server did not answer in time").await
            }
        }
    }

    fn unbind(&mut self, id: &str) {
        let mut directory = self.shared.directory.lock().expect("directory lock");
        directory.release(id, self.conn, Instant::now());
        if directory.session(id).is_none() {
            directory.forget(id);
        }
        drop(directory);
        if let Some(session) = self.session.take() {
            session.handle().close(CloseCode::NORMAL, "not joined");
        }
    }

    /// `join_rejected`, then an open, inert connection (section 5.2).
    async fn refuse(&mut self, reason: &str) -> Result<(), End> {
        self.send("join_rejected", None, json!({ "reason": reason }))
            .await;
        self.inert = true;
        Ok(())
    }

    /// The session's hello, then the room: (our id, the room, resumed).
    async fn open_session(
        &mut self,
        id: &str,
        name: &str,
    ) -> Result<(ClientId, RoomState, bool), String> {
        let (ours, theirs) = tokio::io::duplex(self.shared.config.pipe_bytes);
        if self.shared.manager.attach(theirs, self.addr).is_none() {
            return Err("server full".into());
        }
        let session = SocketStream::from_stream(ours, SocketConfig::default());
        let resume = self
            .shared
            .directory
            .lock()
            .expect("directory lock")
            .session(id)
            .map(|(client, token)| Resume { client, token });
        let hello = SessionHello {
            name: name.chars().take(32).collect(),
            password: None,
            credentials: Vec::new(),
            resume,
        };
        session
            .send(&session::session_message(session::HELLO, &hello))
            .map_err(|e| e.to_string())?;
        self.session = Some(session);
        let welcome: Welcome = loop {
            let message = self.next_session_message().await?;
            match (message.channel_id(), message.action_id()) {
                (SESSION_CHANNEL, session::WELCOME) => {
                    break message.content().map_err(|e| e.to_string())?
                }
                (SESSION_CHANNEL, session::REFUSED) => {
                    let refused: session::Refused = message.content().map_err(|e| e.to_string())?;
                    // An expired session: start a new one under the same id.
                    if hello.resume.is_some() && matches!(refused.code, 1..=3) {
                        self.shared
                            .directory
                            .lock()
                            .expect("directory lock")
                            .forget_session(id);
                        return Box::pin(self.open_session(id, name)).await;
                    }
                    return Err(refused.reason);
                }
                _ => {}
            }
        };
        self.shared
            .directory
            .lock()
            .expect("directory lock")
            .welcomed(id, welcome.client, welcome.token.clone());
        // Rooms are found by name, so one join at a time on this listener.
        let shared = self.shared.clone();
        let _guard = shared.join_lock.lock().await;
        self.request(RoomAction::ListRooms).await?;
        let list = loop {
            let message = self.next_session_message().await?;
            if let Some(RoomEvent::List(list)) = RoomEvent::decode(&message) {
                break list;
            }
        };
        let asked = match list.iter().find(|room| room.name == self.ask.name) {
            Some(room) => self.request(RoomAction::Join(room.id)).await?,
            None => {
                let room = CreateRoom {
                    name: self.ask.name.clone(),
                    max_players: self.ask.max_players,
                    metadata: [("protocol".to_string(), "axispy".to_string())].into(),
                    private: false,
                };
                self.request(RoomAction::Create(room)).await?
            }
        };
        // The room's state comes before the request's answer.
        let mut state = None;
        loop {
            let message = self.next_session_message().await?;
            if message.channel_id() == SESSION_CHANNEL {
                match message.action_id() {
                    session::ACCEPTED if message.content::<u64>().ok() == Some(asked) => break,
                    session::REJECTED => {
                        let rejected: session::Rejected =
                            message.content().map_err(|e| e.to_string())?;
                        if rejected.id == asked {
                            return Err(axispy_reason(&rejected.reason));
                        }
                    }
                    _ => {}
                }
                continue;
            }
            if let Some(event) = RoomEvent::decode(&message) {
                self.view.apply(&event);
                if let RoomEvent::State(s) = event {
                    state = Some(s);
                }
            }
        }
        let state = state.ok_or("no room state")?;
        Ok((welcome.client, state, welcome.resumed))
    }
}
