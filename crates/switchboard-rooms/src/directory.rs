//! Rooms across several server processes (`docs/SCALING.md`): a
//! matchmaker (the `switchboard-redis` crate's `Matchmaker`) lists the rooms
//! of every process, places a new room on the least-loaded process, and
//! routes a join to the process that holds the room, with a **seat
//! reservation** the client presents there.
//!
//! ```text
//!  client ──join room 7──▶ matchmaker ──reserve a seat (Redis, atomic)──▶ ok, process 3
//!  client ◀──Seat { addr of process 3, reservation }──┘
//!  client ──JoinReserved(reservation)──▶ process 3: seal, expiry, once only ──▶ in the room
//! ```
//!
//! A reservation is a connect token (`switchboard::token`, the one fleets
//! use): sealed (XChaCha20-Poly1305) with a key every process of the
//! service shares, naming the process it is good for ([`process_name`])
//! and the room (its user data), expiring within seconds, and taken once
//! (the process's [`TokenGate`]); a process in directory mode admits no
//! create or join without one, so every seat was counted by the matchmaker
//! (members plus live reservations within the room's size, in one Redis
//! script) and the process checks the room's size again itself.
//!
//! The process publishes its rooms ([`DirectorySnapshot`], at most every
//! [`PUBLISH_EVERY`] while they change) through a channel to the task that
//! writes them to Redis; the logic never waits for Redis, so games in
//! progress go on when it is down.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchboard::session::ticket::{self, unix_secs};
use switchboard::token::{ConnectToken, TokenError, TokenGate, TokenKey, TokenRules, NONCE_LEN};
use tokio::sync::mpsc;

use std::net::SocketAddr;

use switchboard::message::TypedMessage;
use switchboard::socket::{SocketConfig, SocketStream};

use crate::protocol::{CreateRoom, RoomAction, RoomId, RoomSummary};

/// How often a process publishes its rooms while they change.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// Bits of a room id that number rooms within one process; the bits above
/// them are the process's number, so ids are unique across processes.
pub const ROOM_BITS: u32 = 20;

/// A room as the directory lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomRecord {
    /// What a list shows.
    pub summary: RoomSummary,
    /// Joined by id only, never listed.
    pub private: bool,
}

/// Everything one process holds, as it publishes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirectorySnapshot {
    /// Its rooms.
    pub rooms: Vec<RoomRecord>,
    /// Players in its rooms (its load).
    pub players: usize,
    /// Reservations taken since the last snapshot (room, nonce): members
    /// now, no longer to be counted as seats held for someone.
    pub taken: Vec<(RoomId, [u8; NONCE_LEN])>,
}

/// A seat the matchmaker reserved: good once, on one process, until it
/// expires. Opaque to clients: a sealed connect token (`docs/PROTOCOL.md`,
/// "Connect tokens") with client id 0 (the matchmaker knows no accounts),
/// one server ([`process_name`]), its expiry, and the room as its user
/// data (none: a room to create; else the room id, 4 bytes big-endian).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// The sealed token.
    pub token: Vec<u8>,
}

/// The name rooms process `process` answers to in its reservations'
/// tokens.
pub fn process_name(process: u32) -> String {
    format!("rooms process {process}")
}

/// Where to go, and the reservation to present there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seat {
    /// The process's address (`host:port`).
    pub addr: String,
    /// The reservation.
    pub reservation: Reservation,
    /// The SHA-256 fingerprint of the key the process presents to other
    /// machines, as it published it (`None`: it speaks plain, on loopback
    /// or by its operator's choice). As trusted as the matchmaker's
    /// answer: [`dialer`](Self::dialer) pins the process by it.
    pub tls: Option<[u8; 32]>,
}

impl Seat {
    /// The dialer to reach the seat's process with: the process pinned by
    /// the fingerprint the matchmaker gave, or else the default
    /// (`RoomClient::connect_via(seat.dialer(), &seat.addr, ..)`).
    pub fn dialer(&self) -> switchboard::socket::Dialer {
        let dialer = switchboard::socket::Dialer::default();
        match self.tls {
            Some(fingerprint) => dialer.trust(switchboard::tls::ServerTrust::pinned(
                switchboard::tls::Fingerprint(fingerprint),
            )),
            None => dialer,
        }
    }
}

/// A create with a reservation (`RoomAction::CreateReserved`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateReserved {
    /// The reservation the matchmaker gave.
    pub reservation: Reservation,
    /// The room.
    pub room: CreateRoom,
}

impl Reservation {
    /// A reservation of `room` (`None`: a room to create) on `process`,
    /// good until `expires_at` (Unix seconds), sealed under `key` with
    /// `nonce` (random: the matchmaker counts the seat under it).
    pub fn seal(
        key: &TokenKey,
        room: Option<RoomId>,
        process: u32,
        expires_at: u64,
        nonce: [u8; NONCE_LEN],
    ) -> Self {
        let token = ConnectToken {
            client_id: 0,
            servers: vec![process_name(process)],
            expires_at,
            user_data: room
                .map(|room| room.0.to_be_bytes().to_vec())
                .unwrap_or_default(),
        };
        Self {
            // One short name, four bytes of user data: within every bound.
            token: token.seal(key, nonce).unwrap_or_default(),
        }
    }

    /// A reservation sealed with a fresh random nonce.
    pub fn seal_new(key: &TokenKey, room: Option<RoomId>, process: u32, expires_at: u64) -> Self {
        Self::seal(key, room, process, expires_at, ticket::token_nonce())
    }
}

/// The room a reservation's user data names (`None`: a room to create).
fn reserved_room(token: &ConnectToken) -> Result<Option<RoomId>, String> {
    match token.user_data.as_slice() {
        [] => Ok(None),
        bytes => <[u8; 4]>::try_from(bytes)
            .map(|id| Some(RoomId(u32::from_be_bytes(id))))
            .map_err(|_| "the reservation is not valid".to_string()),
    }
}

/// Why a reservation's token was refused, for the player.
fn refusal(err: TokenError) -> String {
    match err {
        TokenError::Expired => "the reservation has expired; ask the matchmaker again",
        TokenError::OtherServer => "the reservation is for another server",
        TokenError::Replayed => "the reservation was used already",
        TokenError::Busy => "too many reservations at once; ask the matchmaker again shortly",
        _ => "the reservation is not valid",
    }
    .to_string()
}

/// The matchmaker's answer to `request`: its content, or the reason it
/// gave for refusing.
async fn ask_matchmaker(
    matchmaker: SocketAddr,
    request: RoomAction,
    timeout: Duration,
) -> std::io::Result<RoomAction> {
    let mut socket = SocketStream::dial(matchmaker, SocketConfig::default());
    let message = request.to_message().map_err(std::io::Error::other)?;
    let reply = socket.ask(&message, timeout).await;
    socket.close("done");
    match reply?
        .typed::<RoomAction>()
        .map_err(std::io::Error::other)?
    {
        RoomAction::MatchRefused(reason) => Err(std::io::Error::other(reason)),
        answer => Ok(answer),
    }
}

/// The matchmaker answered something else than it was asked for.
fn unexpected(answer: RoomAction) -> std::io::Error {
    std::io::Error::other(format!("unexpected answer {}", answer.action_name()))
}

/// Every listed room of the service, from its matchmaker.
pub async fn list_rooms(
    matchmaker: SocketAddr,
    timeout: Duration,
) -> std::io::Result<Vec<RoomSummary>> {
    match ask_matchmaker(matchmaker, RoomAction::MatchList, timeout).await? {
        RoomAction::Listed(rooms) => Ok(rooms),
        other => Err(unexpected(other)),
    }
}

/// A seat in a new room on the least-loaded process: connect to its
/// `addr` and [`RoomClient::create_reserved`](crate::RoomClient::create_reserved).
pub async fn reserve_new_room(matchmaker: SocketAddr, timeout: Duration) -> std::io::Result<Seat> {
    match ask_matchmaker(matchmaker, RoomAction::MatchCreate, timeout).await? {
        RoomAction::SeatReserved(seat) => Ok(seat),
        other => Err(unexpected(other)),
    }
}

/// A seat in `room`: connect to its `addr` and
/// [`RoomClient::join_reserved`](crate::RoomClient::join_reserved). Refused
/// with the reason when the room is full (members and live reservations),
/// locked, started or gone.
pub async fn reserve_seat(
    matchmaker: SocketAddr,
    room: RoomId,
    timeout: Duration,
) -> std::io::Result<Seat> {
    match ask_matchmaker(matchmaker, RoomAction::MatchJoin(room), timeout).await? {
        RoomAction::SeatReserved(seat) => Ok(seat),
        other => Err(unexpected(other)),
    }
}

/// A rooms process's place in the directory: its number, the gate its
/// reservations pass (the service's key, each taken once), where its
/// snapshots go.
#[derive(Debug)]
pub struct DirectoryLink {
    process: u32,
    gate: TokenGate,
    snapshots: mpsc::UnboundedSender<DirectorySnapshot>,
    /// Reservations taken since the last snapshot.
    taken: Vec<(RoomId, [u8; NONCE_LEN])>,
}

impl DirectoryLink {
    /// Process number `process` (unique in the service), the service's key
    /// `key`; snapshots go to `snapshots`. Reservations taken are
    /// remembered until they expire, at most
    /// [`TokenRules::max_remembered`]'s default live ones.
    pub fn new(
        process: u32,
        key: [u8; 32],
        snapshots: mpsc::UnboundedSender<DirectorySnapshot>,
    ) -> Self {
        Self {
            process,
            gate: TokenRules::new(TokenKey(key), vec![process_name(process)]).gate(),
            snapshots,
            taken: Vec::new(),
        }
    }

    /// The process's number.
    pub fn process(&self) -> u32 {
        self.process
    }

    /// Whether `reservation` admits anyone here now: the room it reserves
    /// a seat in (`None`: a room to create), or why not. Changes nothing.
    pub(crate) fn admits(&self, reservation: &Reservation) -> Result<Option<RoomId>, String> {
        let (token, _) = self
            .gate
            .check(&reservation.token, unix_secs())
            .map_err(refusal)?;
        reserved_room(&token)
    }

    /// Takes `reservation`, which [`admits`](Self::admits) passed: it will
    /// not admit anyone again.
    pub(crate) fn take(&mut self, reservation: &Reservation) {
        let now = unix_secs();
        let Ok((token, nonce)) = self.gate.check(&reservation.token, now) else {
            return;
        };
        self.gate.remember(nonce, token.expires_at, now);
        if let Ok(Some(room)) = reserved_room(&token) {
            self.taken.push((room, nonce));
        }
    }

    /// The reservations taken since this was last asked.
    pub(crate) fn drain_taken(&mut self) -> Vec<(RoomId, [u8; NONCE_LEN])> {
        std::mem::take(&mut self.taken)
    }

    /// Sends a snapshot to the publisher (dropped if it stopped).
    pub(crate) fn publish(&self, snapshot: DirectorySnapshot) {
        let _ = self.snapshots.send(snapshot);
    }

    /// The id of this process's `n`-th room.
    pub(crate) fn room_id(&self, n: u32) -> RoomId {
        RoomId((self.process << ROOM_BITS) | (n & ((1 << ROOM_BITS) - 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = [7; 32];

    #[test]
    fn a_reservation_is_good_once_for_its_process_room_and_time() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let mut link = DirectoryLink::new(3, KEY, tx);
        let key = TokenKey(KEY);
        let later = unix_secs() + 10;
        let seat = Reservation::seal_new(&key, Some(RoomId(5)), 3, later);
        assert_eq!(link.admits(&seat), Ok(Some(RoomId(5))));
        assert_eq!(
            link.admits(&seat),
            Ok(Some(RoomId(5))),
            "a check takes nothing"
        );
        link.take(&seat);
        assert_eq!(link.drain_taken().len(), 1);
        assert!(link.admits(&seat).unwrap_err().contains("used"));

        let elsewhere = Reservation::seal_new(&key, Some(RoomId(5)), 4, later);
        assert!(link
            .admits(&elsewhere)
            .unwrap_err()
            .contains("another server"));
        let expired = Reservation::seal_new(&key, Some(RoomId(5)), 3, unix_secs());
        assert!(link.admits(&expired).unwrap_err().contains("expired"));
        let forged = Reservation::seal_new(&TokenKey([8; 32]), Some(RoomId(5)), 3, later);
        assert!(link.admits(&forged).unwrap_err().contains("not valid"));
        let mut tampered = Reservation::seal_new(&key, Some(RoomId(5)), 3, later);
        let last = tampered.token.len() - 20;
        tampered.token[last] ^= 1;
        assert!(link.admits(&tampered).unwrap_err().contains("not valid"));
        let create = Reservation::seal_new(&key, None, 3, later);
        assert_eq!(link.admits(&create), Ok(None));
    }

    #[test]
    fn room_ids_carry_the_process_number() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let link = DirectoryLink::new(3, KEY, tx);
        assert_eq!(link.room_id(1), RoomId((3 << ROOM_BITS) | 1));
        assert_ne!(
            link.room_id(1),
            DirectoryLink::new(4, KEY, mpsc::unbounded_channel().0).room_id(1)
        );
    }
}
