//! What the AxisPy listener remembers across connections: each AxisPy
//! player id's session (its Switchboard id and reconnect token, the address
//! it came from, the connection that holds it now), the ids kicked from each
//! room, and the numbers shown as `client_id`.
//!
//! AxisPy clients pick their own ids and have no credential, so an id alone
//! proves nothing: everyone in the room sees it. A new id is admitted among
//! every id of the server ([`PlayerIds`]: native players', the server's
//! own), so an AxisPy client can never go by another player's id. A
//! connection may take over an id only when it comes from the address the
//! id first came from, and the connection holding it (if any) no longer
//! answers: the proof a reconnecting AxisPy client can give. One address
//! has at most `max_per_address` ids remembered: its oldest released id
//! gives way to a new one, and past that it is refused, so one address
//! cannot fill the directory for everyone.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use switchboard::session::{IdClaim, IdRefusal, PlayerIds, ReconnectToken};
use switchboard::socket::address_key;
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
    /// Its hold among the server's ids, let go when it is forgotten.
    _claim: IdClaim,
}

/// What a connection asking for an id gets.
pub(crate) enum Claim {
    /// The id is free and may be taken: new (admitted among the server's
    /// ids: the claim to [`bind`](Directory::bind) it with), or known and
    /// held by no connection (`None`).
    Free(Option<IdClaim>),
    /// A live connection holds it: probe that one first.
    Held(mpsc::Sender<Probe>),
    /// From another address than the id's: refused.
    Foreign,
    /// Kicked from this room.
    Kicked,
    /// Too many ids remembered.
    Full,
    /// Too many ids remembered from this address, none released.
    AddressFull,
    /// Another player of the server (a native one, say) goes by it, or it
    /// is reserved (the server's own).
    Taken(IdRefusal),
}

/// The listener's memory, behind one lock.
pub(crate) struct Directory {
    known: HashMap<String, Known>,
    by_client: HashMap<ClientId, String>,
    kicked: HashSet<(String, String)>,
    kicked_order: VecDeque<(String, String)>,
    numbers: HashMap<ClientId, u32>,
    next_number: u32,
    /// Every id of the server, whatever its connection's kind.
    ids: PlayerIds,
    /// Ids remembered per address ([`address_key`]).
    per_address: HashMap<IpAddr, usize>,
    /// Ids remembered at most (and kicks).
    max: usize,
    /// Ids remembered per address at most.
    max_per_address: usize,
    /// How long an id whose connection ended is kept (the session's grace).
    grace: Duration,
}

impl Directory {
    pub(crate) fn new(ids: PlayerIds, max: usize, max_per_address: usize, grace: Duration) -> Self {
        Self {
            known: HashMap::new(),
            by_client: HashMap::new(),
            kicked: HashSet::new(),
            kicked_order: VecDeque::new(),
            numbers: HashMap::new(),
            next_number: 1,
            ids,
            per_address: HashMap::new(),
            max,
            max_per_address: max_per_address.max(1),
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
            Some(known) if known.ip != ip => return Claim::Foreign,
            Some(Known {
                live: Some((_, probe)),
                ..
            }) => return Claim::Held(probe.clone()),
            Some(_) => return Claim::Free(None),
            None => {}
        }
        let Some(client) = super::wire::parse_client_id(id) else {
            return Claim::Taken(IdRefusal::Reserved);
        };
        let key = address_key(ip);
        if self.per_address.get(&key).copied().unwrap_or(0) >= self.max_per_address {
            match self.oldest_released(key) {
                Some(old) => self.forget(&old),
                None => return Claim::AddressFull,
            }
        }
        if self.known.len() >= self.max {
            return Claim::Full;
        }
        match self.ids.claim(client) {
            Ok(claim) => Claim::Free(Some(claim)),
            Err(refusal) => Claim::Taken(refusal),
        }
    }

    /// The id from `key` released the longest ago.
    fn oldest_released(&self, key: IpAddr) -> Option<String> {
        self.known
            .iter()
            .filter(|(_, k)| address_key(k.ip) == key)
            .filter_map(|(id, k)| Some((k.released?, id)))
            .min()
            .map(|(_, id)| id.clone())
    }

    /// Binds `id` to connection `conn` after a successful claim (`claim`
    /// is what it gave: the id's hold, for a new one).
    pub(crate) fn bind(
        &mut self,
        id: &str,
        ip: IpAddr,
        conn: u64,
        probe: mpsc::Sender<Probe>,
        claim: Option<IdClaim>,
    ) -> bool {
        if !self.known.contains_key(id) {
            let Some(claim) = claim else {
                // Forgotten since its claim (expired, kicked): not bound.
                return false;
            };
            *self.per_address.entry(address_key(ip)).or_default() += 1;
            self.known.insert(
                id.to_string(),
                Known {
                    client: None,
                    ip,
                    live: None,
                    released: None,
                    _claim: claim,
                },
            );
        }
        if let Some(known) = self.known.get_mut(id) {
            known.live = Some((conn, probe));
            known.released = None;
        }
        true
    }

    /// Ids remembered now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.known.len()
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
            let key = address_key(known.ip);
            if let Some(n) = self.per_address.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.per_address.remove(&key);
                }
            }
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

    fn directory(max: usize, per_address: usize) -> Directory {
        Directory::new(PlayerIds::new(), max, per_address, Duration::from_secs(60))
    }

    /// Claims and binds `id` for connection `conn` from `from`.
    fn take(dir: &mut Directory, id: &str, from: IpAddr, conn: u64, now: Instant) -> bool {
        let Claim::Free(claim) = dir.claim(id, "Lobby", from, now) else {
            return false;
        };
        let (probe, _rx) = mpsc::channel(1);
        dir.bind(id, from, conn, probe, claim)
    }

    #[test]
    fn an_id_held_elsewhere_must_be_probed_and_a_foreign_address_is_refused() {
        let mut dir = directory(100, 100);
        let now = Instant::now();
        let (probe, _rx) = mpsc::channel(1);
        let Claim::Free(claim) = dir.claim(A, "Lobby", ip(1), now) else {
            panic!("a new id is free");
        };
        assert!(dir.bind(A, ip(1), 1, probe, claim));
        assert!(matches!(dir.claim(A, "Lobby", ip(1), now), Claim::Held(_)));
        assert!(matches!(dir.claim(A, "Lobby", ip(2), now), Claim::Foreign));
        dir.release(A, 1, now);
        assert!(matches!(
            dir.claim(A, "Lobby", ip(1), now),
            Claim::Free(None)
        ));
        assert!(matches!(dir.claim(A, "Lobby", ip(2), now), Claim::Foreign));
        // After the grace the id is anyone's again.
        let later = now + Duration::from_secs(61);
        assert!(matches!(
            dir.claim(A, "Lobby", ip(2), later),
            Claim::Free(Some(_))
        ));
    }

    #[test]
    fn a_kicked_id_stays_out_of_that_room_and_kicks_are_bounded() {
        let mut dir = directory(2, 2);
        let now = Instant::now();
        dir.kick(A, "Lobby");
        assert!(matches!(dir.claim(A, "Lobby", ip(1), now), Claim::Kicked));
        assert!(matches!(dir.claim(A, "Other", ip(1), now), Claim::Free(_)));
        dir.kick("b", "Lobby");
        dir.kick("c", "Lobby");
        assert!(
            matches!(dir.claim(A, "Lobby", ip(1), now), Claim::Free(_)),
            "oldest forgotten"
        );
    }

    #[test]
    fn axispy_id_collision_with_the_server_or_a_native_player_is_refused() {
        let ids = PlayerIds::new();
        let mut dir = Directory::new(ids.clone(), 100, 100, Duration::from_secs(60));
        let now = Instant::now();
        assert!(matches!(
            dir.claim(super::super::wire::SERVER_ID, "Lobby", ip(1), now),
            Claim::Taken(IdRefusal::Reserved)
        ));
        // A native player's session holds its id among the server's ids.
        let native = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb";
        let _session = ids
            .claim(super::super::wire::parse_client_id(native).unwrap())
            .unwrap();
        assert!(matches!(
            dir.claim(native, "Lobby", ip(1), now),
            Claim::Taken(IdRefusal::InUse)
        ));
        // An AxisPy id holds its place until it is forgotten.
        assert!(take(&mut dir, A, ip(1), 1, now));
        assert!(ids.contains(super::super::wire::parse_client_id(A).unwrap()));
        dir.forget(A);
        assert!(!ids.contains(super::super::wire::parse_client_id(A).unwrap()));
    }

    #[test]
    fn axispy_directory_filled_from_one_address_leaves_room_for_others() {
        let mut dir = directory(100, 3);
        let now = Instant::now();
        let id = |n: u8| format!("{n:08x}-aaaa-4aaa-8aaa-aaaaaaaaaaaa");
        // Join-and-hang-up cycles from one address: its oldest released id
        // gives way each time, its share never grows past three.
        for n in 1..=50u8 {
            assert!(take(&mut dir, &id(n), ip(1), n.into(), now), "cycle {n}");
            dir.release(&id(n), n.into(), now);
        }
        assert_eq!(dir.len(), 3);
        // Three held at once: the fourth from that address is refused...
        for n in 51..=53u8 {
            assert!(take(&mut dir, &id(n), ip(1), n.into(), now));
        }
        assert!(matches!(
            dir.claim(&id(54), "Lobby", ip(1), now),
            Claim::AddressFull
        ));
        // ...and a newcomer from elsewhere is not.
        assert!(take(&mut dir, &id(55), ip(2), 55, now));
    }
}
