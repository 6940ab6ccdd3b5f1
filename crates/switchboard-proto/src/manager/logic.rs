//! What a game implements: [`GameLogic`]. Requests come in, are validated
//! without changing anything, and only then applied.

use std::net::SocketAddr;

use serde::de::DeserializeOwned;

use crate::codec::ContentError;
use crate::message::{Action, Channel, DecodeError, Message, TypedMessage};
use crate::session::ClientId;

/// A client's request as the game sees it: its message already decoded
/// into the game's type (`GameLogic::Message`). The sender is stamped by
/// the server: a client cannot speak for another.
#[derive(Debug, Clone)]
pub struct Request<M = Message> {
    /// Who sent it.
    pub client: ClientId,
    /// The client's request id (0 for a plain message sent without one).
    pub id: u64,
    /// What it asks, decoded.
    pub message: M,
}

/// Untyped access, for a `GameLogic` whose `Message` is [`Message`] (the
/// framework's rooms, relays and tools).
impl Request<Message> {
    /// The channel as an enum, or a rejection that answers "unknown
    /// channel".
    pub fn channel<C: Channel>(&self) -> Result<C, Rejection> {
        self.message
            .channel()
            .ok_or_else(|| Rejection::from(DecodeError::UnknownChannel(self.message.channel_id())))
    }

    /// The action as an enum, or a rejection that answers "unknown action".
    pub fn action<A: Action>(&self) -> Result<A, Rejection> {
        self.message.action().ok_or_else(|| {
            Rejection::from(DecodeError::UnknownAction {
                channel: self.message.channel_id(),
                action: self.message.action_id(),
            })
        })
    }

    /// The content as a `T`, or a rejection that answers "bad content".
    pub fn content<T: DeserializeOwned>(&self) -> Result<T, Rejection> {
        self.message.content().map_err(Rejection::from)
    }
}

/// What kind of "no" a [`Rejection`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectionKind {
    /// A well-formed request the rules do not allow. The client gets a
    /// rejection with the reason.
    Invalid,
    /// The channel is not one the game handles: an error reply, and a strike
    /// towards the abuse limit.
    UnknownChannel,
    /// The action is not one the channel handles: likewise.
    UnknownAction,
    /// The content does not decode: likewise.
    BadContent,
}

/// Why a request was not applied. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// What kind.
    pub kind: RejectionKind,
    /// Why, for the player (for [`RejectionKind::Invalid`]) or the developer.
    pub reason: String,
}

impl Rejection {
    /// A request the rules do not allow.
    pub fn invalid(reason: impl Into<String>) -> Self {
        Self {
            kind: RejectionKind::Invalid,
            reason: reason.into(),
        }
    }
}

impl From<ContentError> for Rejection {
    fn from(err: ContentError) -> Self {
        Self {
            kind: RejectionKind::BadContent,
            reason: err.to_string(),
        }
    }
}

/// What the framework answers, before the game sees anything, when a
/// request does not decode into the game's `Message`.
impl From<DecodeError> for Rejection {
    fn from(err: DecodeError) -> Self {
        let kind = match &err {
            DecodeError::UnknownChannel(_) => RejectionKind::UnknownChannel,
            DecodeError::UnknownAction { .. } => RejectionKind::UnknownAction,
            DecodeError::Content(_) => RejectionKind::BadContent,
        };
        Self {
            kind,
            reason: err.to_string(),
        }
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// Who may see an update.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Audience {
    /// Every connected client.
    All,
    /// Every connected client but one.
    AllExcept(ClientId),
    /// One client.
    One(ClientId),
    /// These clients.
    Only(Vec<ClientId>),
}

impl Audience {
    /// Whether `client` is in the audience.
    pub fn includes(&self, client: ClientId) -> bool {
        match self {
            Audience::All => true,
            Audience::AllExcept(other) => *other != client,
            Audience::One(one) => *one == client,
            Audience::Only(list) => list.contains(&client),
        }
    }
}

/// The updates a hook or an applied request sends out. Each message is
/// encoded once, however many clients it reaches.
#[derive(Debug, Default)]
pub struct Outbox {
    updates: Vec<(Audience, Message)>,
    checkpoint: Option<Vec<u8>>,
    unsent: Vec<String>,
}

impl Outbox {
    /// Queues `message` (a value of a typed action enum, or a built
    /// [`Message`]) for `audience`.
    ///
    /// Nothing to check: a typed message is its content's type by
    /// construction. Should a content's own `Serialize` fail all the same
    /// (a hand-written one; bincode refuses a sequence of unknown length),
    /// the update is not sent and the server logs why, as a warning.
    pub fn send(&mut self, audience: Audience, message: impl TypedMessage) {
        match message.to_message() {
            Ok(message) => self.updates.push((audience, message)),
            Err(err) => self.unsent.push(format!(
                "update {} (channel {}) not sent: {err}",
                message.action_name(),
                message.channel_id()
            )),
        }
    }

    /// The updates queued so far.
    pub fn updates(&self) -> &[(Audience, Message)] {
        &self.updates
    }

    /// Takes the queued updates out.
    pub fn take(&mut self) -> Vec<(Audience, Message)> {
        std::mem::take(&mut self.updates)
    }

    /// Why updates were not sent (their content failed to encode), taken
    /// out: the server logs each.
    pub fn take_unsent(&mut self) -> Vec<String> {
        std::mem::take(&mut self.unsent)
    }

    /// Saves `state` as the game's checkpoint, to resume from if this
    /// process dies (`ManagerConfig::checkpoints`; a turn-based game calls
    /// it when a turn completes, with its state in `switchboard::scenario`'s
    /// format). Without a checkpoint store it is dropped; of several queued
    /// before the store takes one, the last counts.
    pub fn checkpoint(&mut self, state: Vec<u8>) {
        self.checkpoint = Some(state);
    }

    /// The checkpoint queued, if any (taken out).
    pub fn take_checkpoint(&mut self) -> Option<Vec<u8>> {
        self.checkpoint.take()
    }
}

/// What the authentication hook sees of a joining client.
#[derive(Debug, Clone)]
pub struct JoinRequest<'a> {
    /// The name it asked for.
    pub name: &'a str,
    /// Its opaque credentials.
    pub credentials: &'a [u8],
    /// Its address, when known.
    pub addr: Option<SocketAddr>,
}

/// The rules of a game, as the server runs them.
///
/// Every client request goes through [`validate`](Self::validate), which
/// cannot change the game (it takes `&self`): a rejected request changes
/// nothing and is answered to its sender only. An accepted request becomes a
/// [`Command`](Self::Command) that [`apply`](Self::apply) carries out, adding
/// updates addressed to exactly the clients that may see them.
pub trait GameLogic: Send + 'static {
    /// What clients ask, decoded: a typed action enum (one channel), a
    /// [`messages!`](crate::messages) set (several), or [`Message`]
    /// (untyped). A request that does not decode into it is answered by
    /// the framework (unknown channel, unknown action, bad content: an
    /// error reply and a strike) and never reaches the game.
    type Message: TypedMessage;

    /// A validated request, ready to apply.
    type Command: Send;

    /// Checks a request against the rules and the current state.
    fn validate(&self, request: &Request<Self::Message>) -> Result<Self::Command, Rejection>;

    /// Applies a validated request.
    fn apply(&mut self, client: ClientId, command: Self::Command, out: &mut Outbox);

    /// May this client join? Runs before it gets an id. Default: yes.
    fn authenticate(&mut self, join: &JoinRequest<'_>) -> Result<(), String> {
        let _ = join;
        Ok(())
    }

    /// A new client joined.
    fn on_join(&mut self, client: ClientId, name: &str, out: &mut Outbox) {
        let _ = (client, name, out);
    }

    /// A client came back within its grace period; its session is intact.
    /// Send it what it missed here.
    fn on_reconnect(&mut self, client: ClientId, out: &mut Outbox) {
        let _ = (client, out);
    }

    /// A client's connection was lost; its session waits out the grace period.
    fn on_connection_lost(&mut self, client: ClientId, out: &mut Outbox) {
        let _ = (client, out);
    }

    /// A client is gone for good: it left, or its grace period passed.
    fn on_leave(&mut self, client: ClientId, out: &mut Outbox) {
        let _ = (client, out);
    }

    /// Where the clients are, for the operator (the admin page's rooms or
    /// tables): a place, its members and a few facts. Asked only when an
    /// operator looks (a stats snapshot). Default: none.
    fn places(&self) -> Vec<Place> {
        Vec::new()
    }

    /// A client was kicked by the server's operator, with `reason`; it is
    /// gone for good. By default the same as [`on_leave`](Self::on_leave).
    fn on_kicked(&mut self, client: ClientId, reason: &str, out: &mut Outbox) {
        let _ = reason;
        self.on_leave(client, out);
    }

    /// How often [`on_tick`](Self::on_tick) runs, if the game has its own
    /// rate (rooms sync entities at 20 Hz: 50 ms). Default: `None`, the
    /// server's `ManagerRules::tick_interval`.
    fn tick_interval(&self) -> Option<std::time::Duration> {
        None
    }

    /// Called every [`tick_interval`](Self::tick_interval), for work on a
    /// clock (timers, periodic state sync).
    fn on_tick(&mut self, now: std::time::Instant, out: &mut Outbox) {
        let _ = (now, out);
    }

    /// About once a second: each connected client's measured round-trip
    /// time (from the connection's keep-alive pings; zero until measured).
    fn on_latency(&mut self, latencies: &[(ClientId, std::time::Duration)], out: &mut Outbox) {
        let _ = (latencies, out);
    }

    /// The game's whole state as it is at `now`, for a recording started
    /// while the game runs (the admin page's start button,
    /// `ManagerHandle::start_recording`): the replay builds the logic as
    /// the recording's header says, then [`restore`](Self::restore)s this.
    /// Instants in it are written with `switchboard::record::clock` (as
    /// offsets from `now`). Default: refused, and a recording can only
    /// start with the server; a game that can say why not (a state that
    /// lives elsewhere too) does.
    fn snapshot(&self, now: std::time::Instant) -> Result<Vec<u8>, String> {
        let _ = now;
        Err("this game's logic takes no snapshot (GameLogic::snapshot): it records from its start only (--record FILE)".into())
    }

    /// Puts back the state [`snapshot`](Self::snapshot) gave, its instants
    /// counted from `now` (the replay's clock at the snapshot). Default:
    /// refused.
    fn restore(&mut self, state: &[u8], now: std::time::Instant) -> Result<(), String> {
        let _ = (state, now);
        Err("this game's logic takes no snapshot".into())
    }
}

/// A place clients are in (a room, a table, a match), as the operator sees
/// it: [`GameLogic::places`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// What the operator calls it ("#3 duel").
    pub name: String,
    /// The clients in it.
    pub members: Vec<ClientId>,
    /// A few facts as label and value ("started", "yes"), in display order.
    pub facts: Vec<(String, String)>,
}
