//! The session table: who is who, across reconnects.
//!
//! ```text
//!            admit_new                 connection lost             grace passes
//!   (none) ───────────▶ Online(peer) ─────────────────▶ Offline ───────────────▶ (expired)
//!                          ▲   │ leave (goodbye)         │ resume(id, token)
//!                          │   ▼                         │  rotates the token
//!                          │ (gone)                      │
//!                          └─────────────────────────────┘
//!   resume while Online(old): the new peer replaces the old one (half-open socket).
//! ```

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::ids::{ClientId, PlayerIds};
use super::token::ReconnectToken;
use super::SharedSession;
use crate::entropy::Entropy;
use crate::limits::address_key;
use crate::message::PeerId;

/// Limits of the session table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionConfig {
    /// How long a disconnected client keeps its session for a reconnect
    /// (default 60 s). Past it the session expires and the game's leave hook
    /// runs; a reconnect then gets [`Refusal::Expired`].
    pub grace_period: Duration,
    /// Sessions held at once, online or within their grace period (default
    /// 1024). A new client that finds them all taken makes the session
    /// offline the longest give way (its grace period ends early); when
    /// every session is online it gets [`Refusal::Full`].
    pub max_sessions: usize,
    /// Sessions held at once for one address while the table is crowded
    /// (default 32; an IPv6 address counts per /64). Crowded means half of
    /// `max_sessions` held: until then players behind one address (a LAN
    /// party, a school, a carrier's NAT) all get sessions. Past it the
    /// address's session offline the longest gives way; when all of them
    /// are online the newcomer gets [`Refusal::TooManyFromAddress`].
    #[serde(alias = "max_sessions_per_ip")]
    pub max_sessions_per_address: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            grace_period: Duration::from_secs(60),
            max_sessions: 1024,
            max_sessions_per_address: 32,
        }
    }
}

/// Why a client was not admitted. Nothing in the table changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// No session has this id (never issued, or long gone).
    #[error("unknown session")]
    UnknownSession,
    /// The token is not the session's current token (wrong, or already used).
    #[error("invalid reconnect token")]
    BadToken,
    /// The session's grace period had passed.
    #[error("session expired")]
    Expired,
    /// The table is at `max_sessions`.
    #[error("server full")]
    Full,
    /// The join password was missing or wrong.
    #[error("wrong password")]
    WrongPassword,
    /// The game's authentication hook said no.
    #[error("not allowed: {0}")]
    NotAllowed(String),
    /// The player name is empty, too long, or has control characters.
    #[error("invalid name: {0}")]
    InvalidName(String),
    /// The client's address holds `max_sessions_per_address` sessions, all online.
    #[error("too many sessions from your address")]
    TooManyFromAddress,
    /// The client's address gave a wrong password recently: it waits this
    /// long before it may try again (the password was not checked).
    #[error("too many wrong passwords; retry in {} s", .0.as_secs().max(1))]
    Throttled(Duration),
    /// The session is not held here and the store shared with other
    /// processes could not be asked (down, slow, or too many lookups at
    /// once): try again shortly.
    #[error("session store unavailable: {0}")]
    Unavailable(String),
    /// The session's id is held by another player of this server (a
    /// compatibility client that chose it) or reserved.
    #[error("duplicate player id")]
    IdInUse,
    /// The server admits new players only with a connect token, and this
    /// hello's was missing, forged, expired, for another server or used
    /// before ([`crate::token`]).
    #[error("connect token refused: {0}")]
    ConnectToken(String),
}

impl Refusal {
    /// The number sent on the wire.
    pub fn code(&self) -> u16 {
        match self {
            Refusal::UnknownSession => 1,
            Refusal::BadToken => 2,
            Refusal::Expired => 3,
            Refusal::Full => 4,
            Refusal::WrongPassword => 5,
            Refusal::NotAllowed(_) => 6,
            Refusal::InvalidName(_) => 7,
            Refusal::TooManyFromAddress => 8,
            Refusal::Throttled(_) => 9,
            Refusal::Unavailable(_) => 10,
            Refusal::IdInUse => 11,
            Refusal::ConnectToken(_) => 12,
        }
    }
}

/// Where a session's client is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Link {
    Online(PeerId),
    Offline {
        #[serde(with = "crate::record::clock::instant")]
        since: Instant,
    },
}

/// One client's session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    /// The public id.
    pub id: ClientId,
    /// The player's name.
    pub name: String,
    /// The address it joined from (an IPv6 /64 as one address).
    pub from: IpAddr,
    /// When the session began.
    #[serde(with = "crate::record::clock::instant")]
    pub joined_at: Instant,
    /// How many times the client came back.
    pub reconnects: u32,
    token: ReconnectToken,
    link: Link,
}

impl Session {
    /// The connection currently serving this session, if online.
    pub fn peer(&self) -> Option<PeerId> {
        match self.link {
            Link::Online(peer) => Some(peer),
            Link::Offline { .. } => None,
        }
    }
}

/// What an admission gave the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// Its id (the old one on a resume).
    pub client: ClientId,
    /// Its new token: the only one that will work next time.
    pub token: ReconnectToken,
    /// Whether an existing session was resumed.
    pub resumed: bool,
    /// A connection this one replaced (a half-open socket of the same
    /// client); the caller closes it.
    pub replaced: Option<PeerId>,
    /// An offline session that gave way to this new one (the table, or the
    /// address's share of it, was full); the game hears it leave.
    pub evicted: Option<ClientId>,
}

/// Every session, and which connection serves which.
pub struct Sessions {
    config: SessionConfig,
    /// Where new ids and tokens come from.
    entropy: Box<dyn Entropy>,
    by_id: HashMap<ClientId, Session>,
    by_peer: HashMap<PeerId, ClientId>,
    /// Sessions per address.
    per_address: HashMap<IpAddr, usize>,
    /// Every id of the server, this table's and compatibility clients'.
    ids: PlayerIds,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("config", &self.config)
            .field("sessions", &self.by_id.len())
            .finish_non_exhaustive()
    }
}

impl Sessions {
    /// An empty table whose ids and tokens come from `entropy` (the OS's
    /// random source in a server: tokens must be unpredictable).
    pub fn new(config: SessionConfig, entropy: Box<dyn Entropy>) -> Self {
        Self {
            config,
            entropy,
            by_id: HashMap::new(),
            by_peer: HashMap::new(),
            per_address: HashMap::new(),
            ids: PlayerIds::new(),
        }
    }

    /// A fresh token from the table's entropy (for a session claimed from
    /// a shared store: it gets the token when the claim succeeds).
    pub fn new_token(&mut self) -> ReconnectToken {
        ReconnectToken::from_entropy(self.entropy.as_mut())
    }

    /// The server's ids ([`PlayerIds`]): this table registers every
    /// session's id there, and never gives out one held by anyone else.
    pub fn ids(&self) -> &PlayerIds {
        &self.ids
    }

    /// Starts a new session for the client on `peer`, from address `from`.
    pub fn admit_new(
        &mut self,
        peer: PeerId,
        name: &str,
        from: IpAddr,
        now: Instant,
    ) -> Result<Admission, Refusal> {
        let from = address_key(from);
        let evicted = self.make_room(from)?;
        // Random ids collide with nothing in practice; the loop makes it a
        // rule (a compatibility client may have chosen any id).
        let client = loop {
            let client = ClientId::from_entropy(self.entropy.as_mut());
            if self.ids.insert(client).is_ok() {
                break client;
            }
        };
        let token = ReconnectToken::from_entropy(self.entropy.as_mut());
        self.insert(peer, client, name, from, 0, token.clone(), now);
        Ok(Admission {
            client,
            token,
            resumed: false,
            replaced: None,
            evicted,
        })
    }

    /// Takes in a session another process held (found in the store shared
    /// with it), for the client now on `peer`, with the token `token` the
    /// store already holds for it. Same limits as a new session.
    pub fn adopt(
        &mut self,
        peer: PeerId,
        session: &SharedSession,
        token: ReconnectToken,
        now: Instant,
    ) -> Result<Admission, Refusal> {
        let from = address_key(session.from);
        if self.ids.contains(session.client) || session.client.is_reserved() {
            return Err(Refusal::IdInUse);
        }
        let evicted = self.make_room(from)?;
        self.ids
            .insert(session.client)
            .map_err(|_| Refusal::IdInUse)?;
        let reconnects = session.reconnects;
        self.insert(
            peer,
            session.client,
            &session.name,
            from,
            reconnects,
            token.clone(),
            now,
        );
        Ok(Admission {
            client: session.client,
            token,
            resumed: true,
            replaced: None,
            evicted,
        })
    }

    /// Room for one more session from `from`: the session offline the
    /// longest gives way when the table (or the address's share) is full.
    fn make_room(&mut self, from: IpAddr) -> Result<Option<ClientId>, Refusal> {
        let crowded = 2 * self.by_id.len() >= self.config.max_sessions.max(1);
        let evicted = if crowded
            && self.per_address.get(&from).copied().unwrap_or(0)
                >= self.config.max_sessions_per_address.max(1)
        {
            let oldest = self.oldest_offline(|s| s.from == from);
            Some(oldest.ok_or(Refusal::TooManyFromAddress)?)
        } else if self.by_id.len() >= self.config.max_sessions {
            Some(self.oldest_offline(|_| true).ok_or(Refusal::Full)?)
        } else {
            None
        };
        Ok(evicted.and_then(|id| self.remove(id)).map(|s| s.id))
    }

    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        peer: PeerId,
        client: ClientId,
        name: &str,
        from: IpAddr,
        reconnects: u32,
        token: ReconnectToken,
        now: Instant,
    ) {
        self.by_id.insert(
            client,
            Session {
                id: client,
                name: name.to_string(),
                from,
                joined_at: now,
                reconnects,
                token,
                link: Link::Online(peer),
            },
        );
        *self.per_address.entry(from).or_default() += 1;
        self.by_peer.insert(peer, client);
    }

    /// Drops a session another process took over; returns it, and the
    /// connection that served it here, if any (the caller closes it).
    pub fn moved_away(&mut self, client: ClientId) -> Option<(Session, Option<PeerId>)> {
        let session = self.remove(client)?;
        let peer = session.peer();
        Some((session, peer))
    }

    /// The sessions online now, with their current tokens (for the store
    /// shared with other processes; the token is shown to nobody else).
    pub fn online(&self) -> impl Iterator<Item = (&Session, &ReconnectToken)> + '_ {
        self.by_id
            .values()
            .filter(|s| s.peer().is_some())
            .map(|s| (s, &s.token))
    }

    /// The session among `which` that has been offline the longest.
    fn oldest_offline(&self, which: impl Fn(&Session) -> bool) -> Option<ClientId> {
        self.by_id
            .values()
            .filter(|s| which(s))
            .filter_map(|s| match s.link {
                Link::Offline { since } => Some((since, s.id)),
                Link::Online(_) => None,
            })
            .min()
            .map(|(_, id)| id)
    }

    /// Takes a session out of the table.
    fn remove(&mut self, client: ClientId) -> Option<Session> {
        let session = self.by_id.remove(&client)?;
        self.ids.release(client);
        if let Some(peer) = session.peer() {
            self.by_peer.remove(&peer);
        }
        if let Some(count) = self.per_address.get_mut(&session.from) {
            *count -= 1;
            if *count == 0 {
                self.per_address.remove(&session.from);
            }
        }
        Some(session)
    }

    /// Gives `client` back to the holder of its current token, on `peer`.
    /// The token is rotated; on any refusal nothing changes.
    pub fn resume(
        &mut self,
        peer: PeerId,
        client: ClientId,
        token: &ReconnectToken,
        now: Instant,
    ) -> Result<Admission, Refusal> {
        let grace = self.config.grace_period;
        let session = self.by_id.get_mut(&client).ok_or(Refusal::UnknownSession)?;
        if !session.token.matches(token) {
            return Err(Refusal::BadToken);
        }
        if let Link::Offline { since } = session.link {
            if now.saturating_duration_since(since) > grace {
                return Err(Refusal::Expired);
            }
        }
        let replaced = session.peer();
        session.token = ReconnectToken::from_entropy(self.entropy.as_mut());
        session.link = Link::Online(peer);
        session.reconnects += 1;
        let token = session.token.clone();
        if let Some(old) = replaced {
            self.by_peer.remove(&old);
        }
        self.by_peer.insert(peer, client);
        Ok(Admission {
            client,
            token,
            resumed: true,
            replaced,
            evicted: None,
        })
    }

    /// The connection on `peer` ended without a goodbye: its session waits
    /// out the grace period. Returns the client, if `peer` served one (a
    /// replaced connection no longer does).
    pub fn connection_lost(&mut self, peer: PeerId, now: Instant) -> Option<ClientId> {
        let client = self.by_peer.remove(&peer)?;
        if let Some(session) = self.by_id.get_mut(&client) {
            session.link = Link::Offline { since: now };
        }
        Some(client)
    }

    /// Every session, by id (the same table gives the same list): what a
    /// snapshot of the core holds of the table.
    pub(crate) fn sessions(&self) -> Vec<Session> {
        let mut sessions: Vec<Session> = self.by_id.values().cloned().collect();
        sessions.sort_by_key(|s| s.id);
        sessions
    }

    /// Takes in the sessions a snapshot held, into an empty table.
    pub(crate) fn restore(&mut self, sessions: Vec<Session>) -> Result<(), String> {
        if !self.by_id.is_empty() {
            return Err("a snapshot is restored into a fresh core".into());
        }
        for session in sessions {
            self.ids
                .insert(session.id)
                .map_err(|e| format!("session {}: {e}", session.id))?;
            if let Some(peer) = session.peer() {
                self.by_peer.insert(peer, session.id);
            }
            *self.per_address.entry(session.from).or_default() += 1;
            self.by_id.insert(session.id, session);
        }
        Ok(())
    }

    /// The client on `peer` left for good: its session ends now.
    pub fn leave(&mut self, peer: PeerId) -> Option<Session> {
        let client = self.by_peer.get(&peer).copied()?;
        self.remove(client)
    }

    /// Ends every session whose grace period has passed; returns them.
    pub fn expire(&mut self, now: Instant) -> Vec<Session> {
        let grace = self.config.grace_period;
        let mut expired: Vec<ClientId> = self
            .by_id
            .values()
            .filter(|s| matches!(s.link, Link::Offline { since } if now.saturating_duration_since(since) > grace))
            .map(|s| s.id)
            .collect();
        // In id order: the same inputs give the same outputs.
        expired.sort_unstable();
        expired
            .into_iter()
            .filter_map(|id| self.remove(id))
            .collect()
    }

    /// The client a connection serves.
    pub fn client_of(&self, peer: PeerId) -> Option<ClientId> {
        self.by_peer.get(&peer).copied()
    }

    /// A session by id.
    pub fn get(&self, client: ClientId) -> Option<&Session> {
        self.by_id.get(&client)
    }

    /// Every session, online or not.
    pub fn iter(&self) -> impl Iterator<Item = &Session> {
        self.by_id.values()
    }

    /// How many sessions exist.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

#[cfg(test)]
mod tests;
