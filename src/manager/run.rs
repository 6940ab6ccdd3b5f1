//! The manager's tokio driver: socket events and the clock into
//! [`ManagerCore`], its actions out to the sockets. No rule lives here.

use std::future::Future;
use std::time::{Duration, Instant};

use super::listing::{ListingStatus, ListingUpdates};
use super::record::SessionRecorder;
use super::run_shared::Stores;
use super::{Control, GameLogic, LogEntry, LogLevel};
use super::{ManagerAction, ManagerConfig, ManagerCore, ManagerEvent};
use crate::message::{Message, SESSION_CHANNEL};
use crate::record::Input;
use crate::session::Refusal;
use crate::socket::{EndpointEvent, EndpointHandle, EndpointStream, Pacer, PeerId};
use crate::token::TokenGate;
use switchboard_proto::manager::protocol::{self, SessionHello};
use switchboard_proto::reason::CloseCode;

/// Events taken in one go before the deliveries they caused may leave.
const BATCH: usize = 256;

fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

pub(super) struct Runner<L: GameLogic> {
    server: EndpointStream,
    handle: EndpointHandle,
    config: ManagerConfig,
    core: ManagerCore<L>,
    /// Where every input goes, when the session is recorded.
    recorder: Option<SessionRecorder>,
    control: Control,
    listing: Option<Box<dyn ListingUpdates>>,
    /// When queued updates leave (see [`Pacer`]).
    pacer: Pacer,
    /// The stores of what outlives this process, if any.
    stores: Stores,
    /// The connect tokens new players must bring, if the server asks any.
    tokens: Option<TokenGate>,
    /// The WebTransport certificate hashes last listed.
    listed_hashes: Vec<String>,
}

impl<L: GameLogic> Runner<L> {
    pub(super) fn new(
        server: EndpointStream,
        config: ManagerConfig,
        core: ManagerCore<L>,
        recorder: Option<SessionRecorder>,
        control: Control,
    ) -> Self {
        Self {
            tokens: config.connect_tokens.as_ref().map(|rules| rules.gate()),
            handle: server.handle(),
            server,
            pacer: Pacer::new(config.pacing, now()),
            config,
            core,
            recorder,
            control,
            listing: None,
            stores: Stores::default(),
            listed_hashes: Vec::new(),
        }
    }

    pub(super) async fn run(mut self, shutdown: impl Future<Output = ()>) -> L {
        tokio::pin!(shutdown);
        let addr = self.handle.local_addr();
        self.start_listing();
        self.stores = Stores::start(&self.config, &self.control);
        let mut tick = tokio::time::interval(self.core.tick_interval());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stop = self.control.shutdown.clone();
        tracing::info!("serving");
        self.publish(LogEntry {
            level: LogLevel::Info,
            text: format!("serving on {addr}"),
        });
        let wake = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(wake);
        let mut armed = false;
        loop {
            tokio::select! {
                event = self.server.next_event() => match event {
                    Some(event) => {
                        self.on_event(event);
                        // What else has arrived goes with it.
                        for _ in 0..BATCH {
                            let Some(event) = self.server.try_next_event() else { break };
                            self.on_event(event);
                        }
                        self.pacer.took(self.server.take_queue_wait());
                    }
                    None => break,
                },
                Some(event) = self.stores.next_answer() => self.take_in(event),
                Some((client, reason, reply)) = self.control.kick_rx.recv() => {
                    let now = now();
                    if let Some(recorder) = &mut self.recorder {
                        let input = Input::Kick { client, reason: reason.clone() };
                        recorder.input(input, now);
                    }
                    let (kicked, actions) = self.core.kick(client, &reason, now);
                    if let Some(recorder) = &mut self.recorder {
                        let actions: Vec<ManagerAction> = actions.collect();
                        recorder.outputs(&actions);
                        carry_out(&self.handle, &self.control, &mut self.pacer, &self.stores, actions.into_iter());
                    } else {
                        carry_out(&self.handle, &self.control, &mut self.pacer, &self.stores, actions);
                    }
                    let _ = reply.send(kicked);
                }
                Some((config, reply)) = self.control.record_rx.recv() => {
                    let _ = reply.send(self.start_recording(config));
                }
                Some(reply) = self.control.stats_rx.recv() => {
                    let handle = &self.handle;
                    let mut stats = self.core.snapshot(now(), |peer| {
                        let socket = handle.peer(peer)?;
                        Some((socket.stats(), socket.peer_addr()))
                    });
                    stats.traffic = handle.traffic();
                    let _ = reply.send(stats);
                }
                _ = tick.tick() => self.on_tick(),
                _ = &mut wake, if armed => armed = false,
                _ = &mut shutdown => break,
                _ = stop.cancelled() => break,
            }
            self.pacer.flush_due(&self.handle, Some(now()));
            if let Some(due) = self.pacer.next_due() {
                let due = tokio::time::Instant::from_std(due);
                if !armed || wake.deadline() > due {
                    wake.as_mut().reset(due);
                    armed = true;
                }
            }
        }
        self.pacer.flush_due(&self.handle, None);
        self.shut_down().await;
        if let Some(recorder) = self.recorder.take() {
            recorder.finish().await;
        }
        self.core.into_logic()
    }

    /// Starts a recording now, from a snapshot of the core and its game;
    /// a stopped recording before it finishes writing on its own.
    fn start_recording(
        &mut self,
        config: super::RecordConfig,
    ) -> Result<(), super::StartRecordingError> {
        if let Some(status) = self.control.current.status().filter(|s| s.recording) {
            return Err(super::StartRecordingError::AlreadyRecording(status.path));
        }
        let now = now();
        let snapshot = self.core.capture(now)?;
        let recorder = SessionRecorder::start::<L>(
            &config,
            &self.config.rules,
            Some((snapshot, now)),
            &self.control.current,
        )
        .map_err(|source| super::StartRecordingError::File {
            path: config.path.clone(),
            source,
        })?;
        if let Some(old) = self.recorder.replace(recorder) {
            tokio::spawn(old.finish());
        }
        self.publish(LogEntry {
            level: LogLevel::Info,
            text: format!("recording to {} from now on", config.path.display()),
        });
        Ok(())
    }

    /// Lists the server where the config says, if anywhere.
    fn start_listing(&mut self) {
        let Some(hook) = self.config.listing.clone() else {
            return;
        };
        let addr = self.handle.local_addr();
        self.list_webtransport_hashes();
        // The tags waiting (the TLS fingerprint) go in the first
        // announcement, not a tick later: a player reading the list then
        // must find the key to pin.
        let tags = std::mem::take(&mut *self.control.tags.lock().expect("tags lock"));
        match hook.0.start(addr, self.status(), &tags) {
            Ok(updates) => self.listing = Some(updates),
            Err(err) => {
                tracing::warn!(%addr, %err, "cannot list the server");
                self.publish(LogEntry {
                    level: LogLevel::Warn,
                    text: format!("cannot announce on UDP {addr}: {err}"),
                });
            }
        }
    }

    fn status(&self) -> ListingStatus {
        ListingStatus {
            players: self.core.players(),
            capacity: self.config.rules.sessions.max_sessions,
        }
    }

    async fn shut_down(&mut self) {
        tracing::info!("shutting down");
        self.publish(LogEntry {
            level: LogLevel::Info,
            text: "shutting down".into(),
        });
        let farewell = self.control.farewell.lock().expect("farewell lock").take();
        self.handle
            .shutdown(farewell.as_deref().unwrap_or("server shutting down"));
        let deadline = tokio::time::Instant::now() + self.config.shutdown_timeout;
        // Keep draining events so that every connection can finish flushing.
        while let Ok(Some(event)) =
            tokio::time::timeout_at(deadline, self.server.next_event()).await
        {
            if let EndpointEvent::PeerDisconnected { .. } = event {
                self.on_event(event);
            }
        }
    }

    fn on_event(&mut self, event: EndpointEvent) {
        let event = match event {
            EndpointEvent::PeerConnected { peer, addr } => ManagerEvent::Connected { peer, addr },
            EndpointEvent::Received(incoming) => {
                let Some(message) = self.admit_token(incoming.peer, incoming.message) else {
                    return;
                };
                ManagerEvent::Received {
                    peer: incoming.peer,
                    message,
                }
            }
            EndpointEvent::PeerDisconnected { peer, reason } => {
                ManagerEvent::Disconnected { peer, reason }
            }
            EndpointEvent::PeerError { peer, error } => ManagerEvent::Failed { peer, error },
        };
        self.take_in(event);
    }

    /// A new player's hello, checked against the connect tokens the server
    /// asks (none: as it is): passed on with the token's user data as its
    /// credentials, or refused here (code 12, the reason) and `None`. The
    /// wall clock is read here, not in the core: what the core is given
    /// (the hello with the user data) is what a recording replays.
    fn admit_token(&mut self, peer: PeerId, message: Message) -> Option<Message> {
        let Some(gate) = &mut self.tokens else {
            return Some(message);
        };
        if message.channel_id() != SESSION_CHANNEL || message.action_id() != protocol::HELLO {
            return Some(message);
        }
        let Ok(mut hello) = message.content::<SessionHello>() else {
            // The core answers what does not decode.
            return Some(message);
        };
        if hello.resume.is_some() {
            return Some(message);
        }
        let unix = crate::session::ticket::unix_secs();
        match gate.admit(&hello.credentials, unix) {
            Ok(token) => {
                tracing::debug!(%peer, client_id = token.client_id, "connect token admitted");
                hello.credentials = token.user_data;
                Some(protocol::session_message(protocol::HELLO, &hello))
            }
            Err(err) => {
                let refusal = Refusal::ConnectToken(err.to_string());
                tracing::info!(%peer, %refusal, "new player refused");
                let refused = protocol::Refused {
                    code: refusal.code(),
                    reason: refusal.to_string(),
                };
                let _ = self.handle.send_to(
                    peer,
                    &protocol::session_message(protocol::REFUSED, &refused),
                );
                self.handle
                    .close_peer_with(peer, CloseCode::REFUSED, &refusal.to_string());
                None
            }
        }
    }

    /// One event into the core (recorded first, when recording), and what
    /// the core did about it out.
    fn take_in(&mut self, event: ManagerEvent) {
        let now = now();
        let Some(recorder) = &mut self.recorder else {
            let actions = self.core.handle(event, now);
            return carry_out(
                &self.handle,
                &self.control,
                &mut self.pacer,
                &self.stores,
                actions,
            );
        };
        recorder.event(&event, now);
        let actions: Vec<ManagerAction> = self.core.handle(event, now).collect();
        recorder.outputs(&actions);
        carry_out(
            &self.handle,
            &self.control,
            &mut self.pacer,
            &self.stores,
            actions.into_iter(),
        );
    }

    fn on_tick(&mut self) {
        let handle = &self.handle;
        let now = now();
        let mut asked = Vec::new();
        let rtt = |peer: PeerId| {
            let rtt = Duration::from_micros(handle.peer(peer)?.stats().rtt_micros);
            asked.push((peer.0, rtt.as_micros() as u64));
            Some(rtt)
        };
        let actions: Vec<ManagerAction> = self.core.tick(now, rtt).collect();
        if let Some(recorder) = &mut self.recorder {
            recorder.input(Input::Tick { rtts: asked }, now);
            recorder.outputs(&actions);
        }
        carry_out(
            &self.handle,
            &self.control,
            &mut self.pacer,
            &self.stores,
            actions.into_iter(),
        );
        let status = self.status();
        if self.listing.is_some() {
            self.list_webtransport_hashes();
        }
        let tags = std::mem::take(&mut *self.control.tags.lock().expect("tags lock"));
        if let Some(listing) = &mut self.listing {
            listing.update(status);
            for (key, value) in tags {
                listing.set_tag(&key, &value);
            }
        }
    }

    /// Queues the WebTransport certificate hashes as listing tags when they
    /// are new ([`WT_TAG`](super::WT_TAG), [`WT_NEXT_TAG`](super::WT_NEXT_TAG);
    /// [`WT_CA`](super::WT_CA) for a certificate browsers trust).
    fn list_webtransport_hashes(&mut self) {
        let Some(offer) = self.handle.webtransport() else {
            return;
        };
        let hashes: Vec<String> = match offer.hashes() {
            hashes if hashes.is_empty() => vec![super::WT_CA.to_string()],
            hashes => hashes.iter().map(ToString::to_string).collect(),
        };
        if hashes == self.listed_hashes {
            return;
        }
        let mut tags = self.control.tags.lock().expect("tags lock");
        for (tag, value) in [super::WT_TAG, super::WT_NEXT_TAG].into_iter().zip(&hashes) {
            tags.push((tag.to_string(), value.clone()));
        }
        drop(tags);
        self.listed_hashes = hashes;
    }

    fn publish(&self, entry: LogEntry) {
        let _ = self.control.log.send(entry);
    }
}

/// Does what the core asked: sends (each message encoded once, however many
/// peers it goes to; updates for many queued for the pacer), closes, and
/// log lines for the operator.
fn carry_out(
    handle: &EndpointHandle,
    control: &Control,
    pacer: &mut Pacer,
    stores: &Stores,
    actions: impl Iterator<Item = ManagerAction>,
) {
    for action in actions {
        match action {
            ManagerAction::Send { peer, message } => {
                let _ = handle.send_message(peer, &message);
            }
            ManagerAction::SendToMany { peers, message } => match handle.encode(&message) {
                Ok(encoded) => {
                    handle.queue_encoded_to_many(peers.iter().copied(), &encoded);
                    pacer.queued(&peers, peers.len(), now());
                }
                Err(err) => {
                    tracing::warn!(channel = message.channel_id(), action = message.action_id(), %err, "update not sent");
                    let _ = control.log.send(LogEntry {
                        level: LogLevel::Warn,
                        text: "an update was too large to send".into(),
                    });
                }
            },
            ManagerAction::Close { peer, code, reason } => {
                handle.close_peer_with(peer, code, &reason)
            }
            ManagerAction::Log(entry) => {
                let _ = control.log.send(entry);
            }
            // The core asks only when the config has a shared store, and
            // then the driver has one.
            ManagerAction::Claim {
                peer,
                client,
                token,
                new_token,
            } => {
                if let Some(shared) = &stores.sessions {
                    shared.claim(peer, client, token, new_token);
                }
            }
            ManagerAction::Share(update) => {
                if let Some(shared) = &stores.sessions {
                    shared.write(update, control);
                }
            }
            ManagerAction::Checkpoint(state) => {
                if let Some(checkpoints) = &stores.checkpoints {
                    checkpoints.save(state);
                }
            }
        }
    }
}
