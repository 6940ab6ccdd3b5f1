//! Zones across several relay processes (`docs/SCALING.md`): each zone lives
//! on one process, which a directory (the `switchboard-redis` crate's
//! `RedisZones`) assigns; a player whose transform names a zone that lives
//! elsewhere is **handed over**: told where to go with a signed ticket that
//! keeps its player id there.
//!
//! ```text
//!  bot ──transform(zone "dock")──▶ relay 1 ──owner of "dock"?──▶ directory: relay 2
//!  bot ◀──Redirect { relay 2's address, Handover ticket }── relay 1 (the others hear it leave)
//!  bot ──Handover(ticket)──▶ relay 2: signed, for relay 2, unexpired, once ──▶ the same id, in "dock"
//! ```
//!
//! A zone's owner is remembered, and asked again after
//! [`ZoneRouting::remember`] while the remembered one still serves; a
//! transform for a zone never seen waits for the directory (the latest one
//! per player, nothing more). When the directory cannot answer, the zone is
//! served where the player is: the game goes on, one zone may briefly live
//! on two processes.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchboard::codec::{self, ContentError};
use switchboard::session::ticket::{self, unix_ms};
use tokio::sync::mpsc;

use crate::transform::Transform;

/// A boxed future, as the directory's calls return.
pub type ZoneFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// The process a zone lives on, and where its players connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneOwner {
    /// Its number in the service.
    pub process: u32,
    /// Its native address (`host:port`).
    pub addr: String,
    /// Its WebSocket listener's address (`host:port`), if it has one.
    pub websocket: Option<String>,
    /// Its QUIC port's address (`host:port`, UDP), if it has one.
    pub quic: Option<String>,
    /// Whether browsers reach it over WebTransport (at `https://{quic}/`),
    /// and the hashes (64 hex digits) of the certificates they trust it by:
    /// the one served now, then the next; empty when it serves a
    /// certificate browsers trust. `None`: no WebTransport.
    pub webtransport: Option<Vec<String>>,
}

/// Where zones live: one assignment for the whole service.
pub trait ZoneDirectory: Send + Sync + 'static {
    /// The process `zone` lives on, assigning it to a live one if none
    /// holds it.
    fn owner<'a>(&'a self, zone: &'a str) -> ZoneFuture<'a, ZoneOwner>;
    /// How many players this process has now (its load, published).
    fn set_players(&self, players: usize);
}

/// A relay process's place among the service's relays
/// ([`RelayConfig::zones`](crate::RelayConfig::zones)).
#[derive(Clone)]
pub struct ZoneRouting {
    /// The directory.
    pub directory: Arc<dyn ZoneDirectory>,
    /// This process's number in the service (player ids start with it).
    pub process: u32,
    /// The service's key, for handover tickets.
    pub key: [u8; 32],
    /// How long a zone's owner is remembered (default 2 s).
    pub remember: Duration,
    /// How long a handover ticket is good (default 10 s).
    pub ticket_life: Duration,
    /// Zones asked of the directory at once at most (default 1,024); a
    /// transform for another unknown zone past it is served here.
    pub max_lookups: usize,
    /// Zone owners remembered at most (default 4,096). Past it, owners not
    /// confirmed within `remember` are forgotten, then the oldest: fresh
    /// zone names cannot grow the relay (they are asked again when used).
    pub max_zones: usize,
}

impl ZoneRouting {
    /// Routing through `directory` for process `process`, with the
    /// service's `key` and the default timers.
    pub fn new(directory: Arc<dyn ZoneDirectory>, process: u32, key: [u8; 32]) -> Self {
        Self {
            directory,
            process,
            key,
            remember: Duration::from_secs(2),
            ticket_life: Duration::from_secs(10),
            max_lookups: 1024,
            max_zones: 4096,
        }
    }
}

impl std::fmt::Debug for ZoneRouting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZoneRouting")
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ZoneRouting {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.directory, &other.directory) && self.process == other.process
    }
}

/// A player's ticket from one relay process to another: the same id and
/// name there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handover {
    /// Its player id (kept).
    pub player_id: u32,
    /// Its name.
    pub name: String,
    /// Whether it is a bot.
    pub bot: bool,
    /// The process it is good for.
    pub process: u32,
    /// When it expires (ms since the Unix epoch).
    pub expires_ms: u64,
    /// Its number: good once.
    pub nonce: [u8; 16],
    /// HMAC-SHA256 of the fields above with the service's key.
    pub mac: [u8; 32],
}

/// Relay → player: your zone lives elsewhere (`RelayAction::Redirect`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redirect {
    /// Where to connect (`host:port`, native).
    pub addr: String,
    /// Where WebSocket players connect instead (`host:port`; the relay
    /// redirects a WebSocket player only when it has this).
    pub websocket: Option<String>,
    /// What to present there (`RelayAction::Handover`), instead of a hello.
    pub ticket: Handover,
    /// Where QUIC players connect instead (`host:port`, UDP), so that they
    /// stay on QUIC. On the wire only to a player connected over QUIC (or
    /// WebTransport), after the other fields ([`encode`](Self::encode)): a
    /// client of before it reads the fields it knows, whole.
    #[serde(skip)]
    pub quic: Option<String>,
    /// The other relay's WebTransport certificate hashes
    /// ([`ZoneOwner::webtransport`]), so that a browser stays on
    /// WebTransport (at `https://{quic}/`). On the wire only to a
    /// WebTransport player that said it follows such redirects
    /// (`RelayOptions::webtransport_redirects`), after `quic`.
    #[serde(skip)]
    pub webtransport: Option<Vec<String>>,
}

/// Which fields of a [`Redirect`] go on the wire: what the player's
/// connection and options let it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectForm {
    /// The native and WebSocket addresses and the ticket.
    Plain,
    /// And the QUIC address (a player on QUIC or WebTransport).
    Quic,
    /// And the QUIC address and the WebTransport hashes (a WebTransport
    /// player that follows WebTransport redirects).
    WebTransport,
}

impl Redirect {
    /// Its content in `form`.
    pub fn encode(&self, form: RedirectForm) -> Result<Vec<u8>, ContentError> {
        let mut content = codec::encode_value(self)?;
        if form != RedirectForm::Plain {
            codec::encode_value_into(&self.quic, &mut content)?;
        }
        if form == RedirectForm::WebTransport {
            codec::encode_value_into(&self.webtransport, &mut content)?;
        }
        Ok(content)
    }

    /// Reads a redirect in any of its forms.
    pub fn read(content: &[u8]) -> Result<Redirect, ContentError> {
        let (mut redirect, mut used) = codec::decode_value_prefix::<Redirect>(content)?;
        if used < content.len() {
            let (quic, more) = codec::decode_value_prefix(&content[used..])?;
            redirect.quic = quic;
            used += more;
        }
        if used < content.len() {
            redirect.webtransport = codec::decode_value(&content[used..])?;
        }
        Ok(redirect)
    }
}

impl Handover {
    fn signed_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(48 + self.name.len());
        bytes.extend_from_slice(&self.player_id.to_le_bytes());
        bytes.extend_from_slice(&(self.name.len() as u32).to_le_bytes());
        bytes.extend_from_slice(self.name.as_bytes());
        bytes.push(u8::from(self.bot));
        bytes.extend_from_slice(&self.process.to_le_bytes());
        bytes.extend_from_slice(&self.expires_ms.to_le_bytes());
        bytes.extend_from_slice(&self.nonce);
        bytes
    }

    /// A ticket for `player_id` to `process`, good for `life`.
    pub fn issue(
        key: &[u8; 32],
        player_id: u32,
        name: &str,
        bot: bool,
        process: u32,
        life: Duration,
    ) -> Self {
        let mut handover = Self {
            player_id,
            name: name.to_string(),
            bot,
            process,
            expires_ms: unix_ms() + life.as_millis() as u64,
            nonce: ticket::nonce(),
            mac: [0; 32],
        };
        handover.mac = ticket::sign(key, &handover.signed_bytes());
        handover
    }

    /// Why it does not admit anyone to `process` now, if it does not.
    pub fn check(&self, key: &[u8; 32], process: u32) -> Result<(), &'static str> {
        if !ticket::verify(key, &self.signed_bytes(), &self.mac) {
            return Err("the handover ticket is not valid");
        }
        if self.process != process {
            return Err("the handover ticket is for another relay");
        }
        if unix_ms() > self.expires_ms {
            return Err("the handover ticket has expired");
        }
        Ok(())
    }
}

/// What to do with a transform.
pub(crate) enum Verdict {
    /// Relay it here.
    Here(Transform),
    /// Its zone lives elsewhere: hand the player over (the transform is
    /// served here if the player cannot follow).
    Elsewhere(ZoneOwner, Transform),
    /// Held until the directory answers.
    Waiting,
}

/// The dispatch's side: owners remembered, transforms waiting for the
/// directory, tickets taken.
pub(crate) struct Zones {
    routing: ZoneRouting,
    owners: HashMap<String, (ZoneOwner, Instant)>,
    /// Each waiting player's latest transform.
    waiting: HashMap<u32, Transform>,
    asking: HashSet<String>,
    answers_tx: mpsc::UnboundedSender<(String, Result<ZoneOwner, String>)>,
    answers: mpsc::UnboundedReceiver<(String, Result<ZoneOwner, String>)>,
    /// Tickets honoured, until they expire.
    taken: HashMap<[u8; 16], u64>,
    /// The directory's outages, told once each (with the count).
    outage: switchboard::session::Outage,
}

impl Zones {
    pub(crate) fn new(routing: ZoneRouting) -> Self {
        let (answers_tx, answers) = mpsc::unbounded_channel();
        Self {
            routing,
            owners: HashMap::new(),
            waiting: HashMap::new(),
            asking: HashSet::new(),
            answers_tx,
            answers,
            taken: HashMap::new(),
            outage: switchboard::session::Outage::new("zone directory"),
        }
    }

    pub(crate) fn routing(&self) -> &ZoneRouting {
        &self.routing
    }

    fn local(&self) -> ZoneOwner {
        ZoneOwner {
            process: self.routing.process,
            addr: String::new(),
            websocket: None,
            quic: None,
            webtransport: None,
        }
    }

    /// Where `player`'s transform goes. A zone's owner known but older
    /// than `remember` is still used while the directory is asked again,
    /// so only a zone never seen makes transforms wait.
    pub(crate) fn route(&mut self, player: u32, transform: Transform) -> Verdict {
        let now = Instant::now();
        let known = self.owners.get(&transform.zone).map(|(owner, at)| {
            let stale = now.saturating_duration_since(*at) >= self.routing.remember;
            (owner.clone(), stale)
        });
        let stale = known.as_ref().is_none_or(|(_, stale)| *stale);
        if stale
            && !self.asking.contains(&transform.zone)
            && self.asking.len() < self.routing.max_lookups
        {
            self.ask(transform.zone.clone());
        }
        match known {
            Some((owner, _)) if owner.process == self.routing.process => Verdict::Here(transform),
            Some((owner, _)) => Verdict::Elsewhere(owner, transform),
            // Too many zones asked at once: served here.
            None if !self.asking.contains(&transform.zone) => Verdict::Here(transform),
            None => {
                self.waiting.insert(player, transform);
                Verdict::Waiting
            }
        }
    }

    fn ask(&mut self, zone: String) {
        self.asking.insert(zone.clone());
        let directory = self.routing.directory.clone();
        let answers = self.answers_tx.clone();
        tokio::spawn(async move {
            let owner = directory.owner(&zone).await;
            let _ = answers.send((zone, owner));
        });
    }

    /// The directory's next answer.
    pub(crate) async fn next_answer(&mut self) -> (String, Result<ZoneOwner, String>) {
        match self.answers.recv().await {
            Some(answer) => answer,
            // Never: this holds a sender.
            None => std::future::pending().await,
        }
    }

    /// Takes an answer in; returns the players whose transforms waited for
    /// it, with their verdicts.
    pub(crate) fn answered(
        &mut self,
        zone: String,
        owner: Result<ZoneOwner, String>,
    ) -> Vec<(u32, Verdict)> {
        self.asking.remove(&zone);
        let owner = match owner {
            Ok(owner) => {
                self.outage.succeeded();
                owner
            }
            Err(err) => {
                // Meanwhile zones are served where their players are.
                self.outage.failed(&err);
                self.local()
            }
        };
        self.remember(zone.clone(), owner.clone(), Instant::now());
        let players: Vec<u32> = self
            .waiting
            .iter()
            .filter(|(_, t)| t.zone == zone)
            .map(|(id, _)| *id)
            .collect();
        players
            .into_iter()
            .filter_map(|id| {
                let transform = self.waiting.remove(&id)?;
                let verdict = if owner.process == self.routing.process {
                    Verdict::Here(transform)
                } else {
                    Verdict::Elsewhere(owner.clone(), transform)
                };
                Some((id, verdict))
            })
            .collect()
    }

    /// Remembers `zone`'s owner, within `max_zones`.
    fn remember(&mut self, zone: String, owner: ZoneOwner, now: Instant) {
        let max = self.routing.max_zones.max(1);
        if self.owners.len() >= max && !self.owners.contains_key(&zone) {
            let fresh = self.routing.remember;
            self.owners
                .retain(|_, (_, at)| now.saturating_duration_since(*at) < fresh);
            if self.owners.len() >= max {
                let oldest = self.owners.iter().min_by_key(|(_, (_, at))| *at);
                if let Some(oldest) = oldest.map(|(zone, _)| zone.clone()) {
                    self.owners.remove(&oldest);
                }
            }
        }
        self.owners.insert(zone, (owner, now));
    }

    /// Zone owners remembered now.
    #[cfg(test)]
    pub(crate) fn remembered(&self) -> usize {
        self.owners.len()
    }

    /// A player left: nothing of its waits.
    pub(crate) fn forget(&mut self, player: u32) {
        self.waiting.remove(&player);
    }

    /// A ticket to `owner` for `player`.
    pub(crate) fn ticket(&self, player: u32, name: &str, bot: bool, owner: &ZoneOwner) -> Handover {
        let r = &self.routing;
        Handover::issue(&r.key, player, name, bot, owner.process, r.ticket_life)
    }

    /// Honours `ticket` here, once.
    pub(crate) fn take(&mut self, ticket: &Handover) -> Result<(), &'static str> {
        ticket.check(&self.routing.key, self.routing.process)?;
        let now = unix_ms();
        self.taken.retain(|_, expires| *expires >= now);
        if self.taken.contains_key(&ticket.nonce) {
            return Err("the handover ticket was used already");
        }
        self.taken.insert(ticket.nonce, ticket.expires_ms);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nowhere;

    impl ZoneDirectory for Nowhere {
        fn owner<'a>(&'a self, _zone: &'a str) -> ZoneFuture<'a, ZoneOwner> {
            Box::pin(async { Err("no directory".to_string()) })
        }
        fn set_players(&self, _players: usize) {}
    }

    #[test]
    fn relay_zone_flood_on_redis_is_bounded_by_max_zones() {
        let mut routing = ZoneRouting::new(Arc::new(Nowhere), 1, [0; 32]);
        routing.max_zones = 100;
        let mut zones = Zones::new(routing);
        for i in 0..10_000 {
            let owner = zones.local();
            zones.answered(format!("zone-{i}"), Ok(owner));
        }
        assert!(zones.remembered() <= 100, "{}", zones.remembered());
    }

    #[test]
    fn a_handover_ticket_is_good_for_its_relay_once_and_cannot_be_altered() {
        let key = [3u8; 32];
        let ticket = Handover::issue(&key, 7, "ann", false, 2, Duration::from_secs(10));
        assert_eq!(ticket.check(&key, 2), Ok(()));
        assert!(ticket.check(&key, 3).is_err(), "another relay");
        assert!(ticket.check(&[4u8; 32], 2).is_err(), "another service");
        let mut renamed = ticket.clone();
        renamed.player_id = 8;
        assert!(renamed.check(&key, 2).is_err(), "altered");
        let expired = Handover::issue(&key, 7, "ann", false, 2, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(2));
        assert!(expired.check(&key, 2).is_err(), "expired");
    }
}
