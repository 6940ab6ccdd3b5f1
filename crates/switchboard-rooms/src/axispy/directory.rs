//! What the AxisPy listener remembers across connections: each AxisPy
//! player id's session (its Switchboard id and reconnect token, the address
//! it came from, the connection that holds it now), the ids kicked from each
//! room, and the numbers shown as `client_id`.
//!
//! AxisPy clients pick their own ids and have no credential, so an id alone
//! proves nothing: everyone in the room sees it. A connection may take over
//! an id only when it comes from the address the id first came from, and
//! the connection holding it (if any) no longer answers: the proof a
//! reconnecting AxisPy client can give.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use switchboard::session::ReconnectToken;
use switchboard::ClientId;
use tokio::sync::{mpsc, oneshot};

/// A question to the connection that holds an id: "are you alive?". It
/// answers within the probe time, `false` (and lets the id go) when its
/// peer is silent.
pub(crate) type Probe = oneshot::Sender<bool>;

/// An id's session.
pub(crate) struct Known {
    /// Its Switchboard session, once welcomed.
    pub(crate) client: Option<(ClientId, ReconnectToken)>,
    /// The address it first came from.
    pub(crate) ip: IpAddr,
    /// The connection holding it, and how to probe that connection.
    pub(crate) live: Option<(u64, mpsc::Sender<Probe>)>,
    /// When its last connection ended (for forgetting it after the grace).
    released: Option<Instant>,
}

/// What a connection asking for an id gets.
pub(crate) enum Claim {
    /// The id is free (new, or held by nobody) and may be taken.
    Free,
    /// A live connection holds it: probe that one first.
    Held(mpsc::Sender<Probe>),
    /// From another address than the id's: refused.
    Foreign,
    /// Kicked from this room.
    Kicked,
    /// Too many ids remembered.
    Full,
}

/// The listener's memory, behind one lock.
pub(crate) struct Directory {
    known: HashMap<String, Known>,
    by_client: HashMap<ClientId, String>,
    kicked: HashSet<(String, String)>,
    kicked_order: VecDeque<(String, String)>,
    numbers: HashMap<ClientId, u32>,
    next_number: u32,
    /// Ids remembered at most (and kicks).
    max: usize,
    /// How long an id whose connection ended is kept (the session's grace).
    grace: Duration,
}

impl Directory {
    pub(crate) fn new(max: usize, grace: Duration) -> Self {
        Self {
            known: HashMap::new(),
            by_client: HashMap::new(),
            kicked: HashSet::new(),
            kicked_order: VecDeque::new(),
            numbers: HashMap::new(),
            next_number: 1,
            max,
            grace,
        }
    }

    /// May a connection from `ip` take `id` in `room`?
    pub(crate) fn claim(&mut self, id: &str, room: &str, ip: IpAddr, now: Instant) -> Claim {
        self.forget_expired(now);
        if self.kicked.contains(&(room.to_string(), id.to_string())) {
            return Claim::Kicked;
        }
        match self.known.get(id) {
            None if self.known.len() >= self.max => Claim::Full,
            None => Claim::Free,
            Some(known) if known.ip != ip => Claim::Foreign,
            Some(Known {
                live: Some((_, probe)),
                ..
            }) => Claim::Held(probe.clone()),
            Some(_) => Claim::Free,
        }
    }

    /// Binds `id` to connection `conn` (after a successful claim).
    pub(crate) fn bind(&mut self, id: &str, ip: IpAddr, conn: u64, probe: mpsc::Sender<Probe>) {
        let known = self.known.entry(id.to_string()).or_insert(Known {
            client: None,
            ip,
            live: None,
            released: None,
        });
        known.live = Some((conn, probe));
        known.released = None;
    }

    /// The session `id` had, to resume.
    pub(crate) fn session(&self, id: &str) -> Option<(ClientId, ReconnectToken)> {
        self.known.get(id)?.client.clone()
    }

    /// Records the session a welcome gave `id`.
    pub(crate) fn welcomed(&mut self, id: &str, client: ClientId, token: ReconnectToken) {
        if let Some(known) = self.known.get_mut(id) {
            if let Some((old, _)) = known.client.replace((client, token)) {
                if old != client {
                    self.by_client.remove(&old);
                }
            }
            self.by_client.insert(client, id.to_string());
        }
    }

    /// `id`'s session is gone on the server (expired): the next hello
    /// starts a new one.
    pub(crate) fn forget_session(&mut self, id: &str) {
        if let Some(known) = self.known.get_mut(id) {
            if let Some((client, _)) = known.client.take() {
                self.by_client.remove(&client);
            }
        }
    }

    /// Connection `conn` let `id` go; its session waits out its grace.
    pub(crate) fn release(&mut self, id: &str, conn: u64, now: Instant) {
        if let Some(known) = self.known.get_mut(id) {
            if known.live.as_ref().is_some_and(|(c, _)| *c == conn) {
                known.live = None;
                known.released = Some(now);
            }
        }
    }

    /// `id` is gone for good (it left, or was kicked).
    pub(crate) fn forget(&mut self, id: &str) {
        if let Some(known) = self.known.remove(id) {
            if let Some((client, _)) = known.client {
                self.by_client.remove(&client);
                self.numbers.remove(&client);
            }
        }
    }

    /// Remembers that `id` was kicked from `room`: its next join there is
    /// refused. The oldest kicks are forgotten past `max`.
    pub(crate) fn kick(&mut self, id: &str, room: &str) {
        let key = (room.to_string(), id.to_string());
        if self.kicked.insert(key.clone()) {
            self.kicked_order.push_back(key);
            while self.kicked_order.len() > self.max {
                if let Some(old) = self.kicked_order.pop_front() {
                    self.kicked.remove(&old);
                }
            }
        }
        self.forget(id);
    }

    /// How AxisPy clients name a player: its AxisPy id, or a native
    /// player's own id.
    pub(crate) fn name_of(&self, client: ClientId) -> String {
        self.by_client
            .get(&client)
            .cloned()
            .unwrap_or_else(|| client.to_string())
    }

    /// The Switchboard id of a player named `id` (an AxisPy id, or a native
    /// player's id).
    pub(crate) fn client_of(&self, id: &str) -> Option<ClientId> {
        match self.known.get(id) {
            Some(known) => known.client.as_ref().map(|(client, _)| *client),
            None => super::wire::parse_client_id(id),
        }
    }

    /// The small number shown as a player's `client_id`.
    pub(crate) fn number(&mut self, client: ClientId) -> u32 {
        if let Some(n) = self.numbers.get(&client) {
            return *n;
        }
        if self.numbers.len() >= self.max {
            self.numbers.clear();
        }
        let n = self.next_number;
        self.next_number = self.next_number.wrapping_add(1).max(1);
        self.numbers.insert(client, n);
        n
    }

    fn forget_expired(&mut self, now: Instant) {
        let grace = self.grace;
        let expired: Vec<String> = self
            .known
            .iter()
            .filter(|(_, k)| k.released.is_some_and(|at| now.duration_since(at) > grace))
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.forget(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa";

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn an_id_held_elsewhere_must_be_probed_and_a_foreign_address_is_refused() {
        let mut dir = Directory::new(100, Duration::from_secs(60));
        let now = Instant::now();
        assert!(matches!(dir.claim(A, "Lobby", ip(1), now), Claim::Free));
        let (probe, _rx) = mpsc::channel(1);
        dir.bind(A, ip(1), 1, probe);
        assert!(matches!(dir.claim(A, "Lobby", ip(1), now), Claim::Held(_)));
        assert!(matches!(dir.claim(A, "Lobby", ip(2), now), Claim::Foreign));
        dir.release(A, 1, now);
        assert!(matches!(dir.claim(A, "Lobby", ip(1), now), Claim::Free));
        assert!(matches!(dir.claim(A, "Lobby", ip(2), now), Claim::Foreign));
        // After the grace the id is anyone's again.
        let later = now + Duration::from_secs(61);
        assert!(matches!(dir.claim(A, "Lobby", ip(2), later), Claim::Free));
    }

    #[test]
    fn a_kicked_id_stays_out_of_that_room_and_kicks_are_bounded() {
        let mut dir = Directory::new(2, Duration::from_secs(60));
        let now = Instant::now();
        dir.kick(A, "Lobby");
        assert!(matches!(dir.claim(A, "Lobby", ip(1), now), Claim::Kicked));
        assert!(matches!(dir.claim(A, "Other", ip(1), now), Claim::Free));
        dir.kick("b", "Lobby");
        dir.kick("c", "Lobby");
        assert!(
            matches!(dir.claim(A, "Lobby", ip(1), now), Claim::Free),
            "oldest forgotten"
        );
    }
}
