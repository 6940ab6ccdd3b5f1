//! Messages from a connection: the session protocol, requests validated by
//! the game, error replies and strikes.

use super::*;

impl<L: GameLogic> ManagerCore<L> {
    pub(super) fn on_message(&mut self, peer: PeerId, message: Message, now: Instant) {
        let Some(state) = self.peers.get_mut(&peer) else {
            return;
        };
        state.last_activity = now;
        let len = message.content_bytes().len() + 8;
        if !state.limiter.allow(len, now) {
            self.stats.rate_limited_total += 1;
            let detail = format!(
                "over the rate limit; retry in {:?}",
                state.limiter.retry_after(len)
            );
            return self.error_reply(peer, 0, ErrorCode::RateLimited, detail, now);
        }
        let client = state.client;
        match (message.channel_id(), client) {
            (SESSION_CHANNEL, _) => self.on_session_message(peer, client, message, now),
            // Channel 0 is the socket's own; 2..=15 carry framework features
            // built on the game logic (rooms) and reach it like any other.
            (channel, _) if channel < SESSION_CHANNEL => {
                let detail = format!("channel {channel} is reserved");
                self.error_reply(peer, 0, ErrorCode::UnknownChannel, detail, now);
            }
            (_, Some(client)) => self.on_request(peer, client, 0, message, false, now),
            (_, None) => {
                let detail = "send a hello first".into();
                self.error_reply(peer, 0, ErrorCode::NotWelcomed, detail, now)
            }
        }
    }

    fn on_session_message(
        &mut self,
        peer: PeerId,
        client: Option<ClientId>,
        message: Message,
        now: Instant,
    ) {
        let bad = ErrorCode::BadContent;
        match (message.action_id(), client) {
            (protocol::HELLO, None) => match message.content::<SessionHello>() {
                Ok(hello) => self.on_hello(peer, hello, now),
                Err(err) => self.error_reply(peer, 0, bad, err.to_string(), now),
            },
            (action @ (protocol::REQUEST | protocol::REQUEST_AGAIN), Some(client)) => {
                match RequestFrame::decode(&message) {
                    Ok(frame) if frame.id != 0 => {
                        let inner = frame.message();
                        if inner.channel_id() <= SESSION_CHANNEL {
                            let detail = format!("channel {} is reserved", inner.channel_id());
                            let code = ErrorCode::UnknownChannel;
                            self.error_reply(peer, frame.id, code, detail, now);
                        } else {
                            let again = action == protocol::REQUEST_AGAIN;
                            self.on_request(peer, client, frame.id, inner, again, now);
                        }
                    }
                    Ok(_) => self.error_reply(peer, 0, bad, "request id 0".into(), now),
                    Err(err) => self.error_reply(peer, 0, bad, err.to_string(), now),
                }
            }
            (protocol::REQUEST | protocol::REQUEST_AGAIN, None) => {
                let detail = "send a hello first".into();
                self.error_reply(peer, 0, ErrorCode::NotWelcomed, detail, now)
            }
            (action, _) => {
                let detail = format!("session action {action} is not expected here");
                self.error_reply(peer, 0, ErrorCode::UnknownSessionAction, detail, now)
            }
        }
    }

    fn on_request(
        &mut self,
        peer: PeerId,
        client: ClientId,
        id: u64,
        message: Message,
        again: bool,
        now: Instant,
    ) {
        // The game's own log lines inside validate and apply carry the client.
        let _session = tracing::info_span!("session", %client, request = id).entered();
        // Only a request marked as sent again is checked against what was
        // handled: a client may number its requests per connection.
        if again && self.answer_again(peer, client, id) {
            return;
        }
        // Measured for the operator only: the rules never see this clock.
        let started = self.stopwatch.map(|clock| clock());
        let verdict = self.judge(peer, client, id, message, now);
        if id != 0 {
            self.remember(client, id, verdict);
        }
        if let (Some(clock), Some(started)) = (self.stopwatch, started) {
            self.stats
                .request_time
                .record(clock().saturating_duration_since(started));
        }
    }

    /// A request `client` sent again (after a reconnect) that was handled
    /// already: its verdict again, not the request applied twice; `false`
    /// for a request not seen before.
    fn answer_again(&mut self, peer: PeerId, client: ClientId, id: u64) -> bool {
        let Some(answered) = self.answered.get(&client) else {
            return false;
        };
        if id > answered.highest {
            return false;
        }
        self.stats.repeated_requests_total += 1;
        match answered.verdicts.iter().find(|(seen, _)| *seen == id) {
            Some((_, verdict)) => {
                let verdict = verdict.clone();
                self.send(peer, verdict);
            }
            None => {
                let detail =
                    format!("request {id} was handled before; its verdict is no longer kept");
                let reply = ErrorReply {
                    id,
                    code: ErrorCode::AlreadyHandled,
                    detail,
                };
                self.send(peer, protocol::session_message(protocol::ERROR, &reply));
            }
        }
        true
    }

    /// Keeps the verdict of `client`'s request `id` for a resend.
    fn remember(&mut self, client: ClientId, id: u64, verdict: Message) {
        let keep = self.config.remembered_verdicts;
        if keep == 0 {
            return;
        }
        let answered = self.answered.entry(client).or_default();
        answered.highest = answered.highest.max(id);
        if answered.verdicts.len() >= keep {
            answered.verdicts.pop_front();
        }
        answered.verdicts.push_back((id, verdict));
    }

    /// Decodes a request into the game's type, has the game validate it and
    /// applies it, or answers why not: the verdict, as sent.
    fn judge(
        &mut self,
        peer: PeerId,
        client: ClientId,
        id: u64,
        message: Message,
        now: Instant,
    ) -> Message {
        let channel = message.channel_id();
        let verdict = <L::Message as TypedMessage>::decode(&message)
            .map_err(Rejection::from)
            .and_then(|message| {
                self.logic.validate(&Request {
                    client,
                    id,
                    message,
                })
            });
        match verdict {
            Ok(command) => {
                let mut out = Outbox::default();
                self.logic.apply(client, command, &mut out);
                self.stats.accepted_total += 1;
                super::super::stats::count_channel(&mut self.stats.accepted_by_channel, channel);
                // Updates first: when the requester hears "accepted", it has
                // already received the state the request produced.
                self.dispatch(out);
                let verdict = protocol::session_message(protocol::ACCEPTED, &id);
                if id != 0 {
                    self.send(peer, verdict.clone());
                }
                verdict
            }
            Err(Rejection {
                kind: RejectionKind::Invalid,
                reason,
            }) => {
                self.stats.rejected_total += 1;
                super::super::stats::count_channel(&mut self.stats.rejected_by_channel, channel);
                let rejected = Rejected { id, reason };
                let verdict = protocol::session_message(protocol::REJECTED, &rejected);
                self.send(peer, verdict.clone());
                verdict
            }
            Err(Rejection { kind, reason }) => {
                let code = match kind {
                    RejectionKind::UnknownChannel => ErrorCode::UnknownChannel,
                    RejectionKind::UnknownAction => ErrorCode::UnknownAction,
                    _ => ErrorCode::BadContent,
                };
                self.answer_error(peer, id, code, reason, now)
            }
        }
    }

    /// Answers a message that could not be handled, and counts a strike.
    pub(super) fn error_reply(
        &mut self,
        peer: PeerId,
        id: u64,
        code: ErrorCode,
        detail: String,
        now: Instant,
    ) {
        self.answer_error(peer, id, code, detail, now);
    }

    /// [`error_reply`](Self::error_reply), and the answer as sent.
    fn answer_error(
        &mut self,
        peer: PeerId,
        id: u64,
        code: ErrorCode,
        detail: String,
        now: Instant,
    ) -> Message {
        self.stats.errors_total += 1;
        *self
            .stats
            .errors_by_code
            .entry(format!("{code:?}"))
            .or_default() += 1;
        let reply = protocol::session_message(protocol::ERROR, &ErrorReply { id, code, detail });
        self.send(peer, reply.clone());
        let window = self.config.strike_window;
        let max = self.config.max_strikes;
        let Some(state) = self.peers.get_mut(&peer) else {
            return reply;
        };
        if state.strikes.strike(now, max, window) {
            let text = format!("{peer}: disconnected after too many invalid messages");
            self.peer_log(peer, LogLevel::Warn, text, now);
            self.close(peer, CloseCode::ABUSE, "too many invalid messages");
        }
        reply
    }
}
