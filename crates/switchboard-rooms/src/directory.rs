//! Rooms across several server processes (`docs/SCALING.md`): a
//! matchmaker (the `switchboard-redis` crate's `Matchmaker`) lists the rooms
//! of every process, places a new room on the least-loaded process, and
//! routes a join to the process that holds the room, with a **seat
//! reservation** the client presents there.
//!
//! ```text
//!  client ──join room 7──▶ matchmaker ──reserve a seat (Redis, atomic)──▶ ok, process 3
//!  client ◀──Seat { addr of process 3, reservation }──┘
//!  client ──JoinReserved(reservation)──▶ process 3: MAC, expiry, once only ──▶ in the room
//! ```
//!
//! A reservation is signed (HMAC-SHA256) with a key every process of the
//! service shares, names the process it is good for, expires within
//! seconds, and is taken once; a process in directory mode admits no
//! create or join without one, so every seat was counted by the matchmaker
//! (members plus live reservations within the room's size, in one Redis
//! script) and the process checks the room's size again itself.
//!
//! The process publishes its rooms ([`DirectorySnapshot`], at most every
//! [`PUBLISH_EVERY`] while they change) through a channel to the task that
//! writes them to Redis; the logic never waits for Redis, so games in
//! progress go on when it is down.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchboard::session::ticket::{self, unix_ms};
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
    pub taken: Vec<(RoomId, [u8; 16])>,
}

/// A seat the matchmaker reserved: good once, on one process, until it
/// expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// The room to join; `None`: a room to create.
    pub room: Option<RoomId>,
    /// The process it is good for.
    pub process: u32,
    /// When it expires (ms since the Unix epoch).
    pub expires_ms: u64,
    /// Its number, random: a reservation is taken once.
    pub nonce: [u8; 16],
    /// HMAC-SHA256 of the fields above with the service's key.
    pub mac: [u8; 32],
}

/// Where to go, and the reservation to present there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seat {
    /// The process's address (`host:port`).
    pub addr: String,
    /// The reservation.
    pub reservation: Reservation,
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
    fn signed_bytes(
        room: Option<RoomId>,
        process: u32,
        expires_ms: u64,
        nonce: &[u8; 16],
    ) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(1 + 4 + 4 + 8 + 16);
        match room {
            Some(room) => {
                bytes.push(1);
                bytes.extend_from_slice(&room.0.to_le_bytes());
            }
            None => bytes.push(0),
        }
        bytes.extend_from_slice(&process.to_le_bytes());
        bytes.extend_from_slice(&expires_ms.to_le_bytes());
        bytes.extend_from_slice(nonce);
        bytes
    }

    /// A reservation signed with `key`.
    pub fn sign(key: &[u8; 32], room: Option<RoomId>, process: u32, expires_ms: u64) -> Self {
        Self::sign_numbered(key, room, process, expires_ms, ticket::nonce())
    }

    /// A reservation with the number `nonce` (the matchmaker counts the
    /// seat under it), signed with `key`.
    pub fn sign_numbered(
        key: &[u8; 32],
        room: Option<RoomId>,
        process: u32,
        expires_ms: u64,
        nonce: [u8; 16],
    ) -> Self {
        let mac = ticket::sign(key, &Self::signed_bytes(room, process, expires_ms, &nonce));
        Self {
            room,
            process,
            expires_ms,
            nonce,
            mac,
        }
    }

    /// Whether it was signed with `key`, is for `process`, and has not
    /// expired at `now_ms`.
    pub fn check(&self, key: &[u8; 32], process: u32, now_ms: u64) -> Result<(), &'static str> {
        let signed = Self::signed_bytes(self.room, self.process, self.expires_ms, &self.nonce);
        if !ticket::verify(key, &signed, &self.mac) {
            return Err("the reservation is not valid");
        }
        if self.process != process {
            return Err("the reservation is for another server");
        }
        if now_ms > self.expires_ms {
            return Err("the reservation has expired; ask the matchmaker again");
        }
        Ok(())
    }
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

/// A rooms process's place in the directory: its number, the service's
/// key, where its snapshots go, and the reservations it has taken.
#[derive(Debug)]
pub struct DirectoryLink {
    process: u32,
    key: [u8; 32],
    snapshots: mpsc::UnboundedSender<DirectorySnapshot>,
    /// Reservations taken, until they expire (a reservation is good once).
    used: HashMap<[u8; 16], u64>,
    /// Reservations taken since the last snapshot.
    taken: Vec<(RoomId, [u8; 16])>,
}

impl DirectoryLink {
    /// Process number `process` (unique in the service), signing key `key`;
    /// snapshots go to `snapshots`.
    pub fn new(
        process: u32,
        key: [u8; 32],
        snapshots: mpsc::UnboundedSender<DirectorySnapshot>,
    ) -> Self {
        Self {
            process,
            key,
            snapshots,
            used: HashMap::new(),
            taken: Vec::new(),
        }
    }

    /// The process's number.
    pub fn process(&self) -> u32 {
        self.process
    }

    /// Whether `reservation` admits a create (`room` None) or a join of
    /// `room` here now.
    pub(crate) fn admits(
        &self,
        reservation: &Reservation,
        room: Option<RoomId>,
    ) -> Result<(), String> {
        reservation
            .check(&self.key, self.process, unix_ms())
            .map_err(str::to_string)?;
        if reservation.room != room {
            return Err("the reservation is for another room".into());
        }
        if self.used.contains_key(&reservation.nonce) {
            return Err("the reservation was used already".into());
        }
        Ok(())
    }

    /// Takes `reservation` (it will not admit anyone again); forgets the
    /// expired ones, so the set stays as small as the reservations alive.
    pub(crate) fn take(&mut self, reservation: &Reservation) {
        let now = unix_ms();
        self.used.retain(|_, expires| *expires >= now);
        self.used.insert(reservation.nonce, reservation.expires_ms);
        if let Some(room) = reservation.room {
            self.taken.push((room, reservation.nonce));
        }
    }

    /// The reservations taken since this was last asked.
    pub(crate) fn drain_taken(&mut self) -> Vec<(RoomId, [u8; 16])> {
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
        let later = unix_ms() + 10_000;
        let seat = Reservation::sign(&KEY, Some(RoomId(5)), 3, later);
        assert_eq!(link.admits(&seat, Some(RoomId(5))), Ok(()));
        assert!(link.admits(&seat, Some(RoomId(6))).is_err(), "another room");
        link.take(&seat);
        assert!(link
            .admits(&seat, Some(RoomId(5)))
            .unwrap_err()
            .contains("used"));

        let elsewhere = Reservation::sign(&KEY, Some(RoomId(5)), 4, later);
        assert!(link
            .admits(&elsewhere, Some(RoomId(5)))
            .unwrap_err()
            .contains("another server"));
        let expired = Reservation::sign(&KEY, Some(RoomId(5)), 3, unix_ms() - 1);
        assert!(link
            .admits(&expired, Some(RoomId(5)))
            .unwrap_err()
            .contains("expired"));
        let forged = Reservation::sign(&[8; 32], Some(RoomId(5)), 3, later);
        assert!(link
            .admits(&forged, Some(RoomId(5)))
            .unwrap_err()
            .contains("not valid"));
        let mut tampered = Reservation::sign(&KEY, Some(RoomId(5)), 3, later);
        tampered.room = Some(RoomId(9));
        assert!(link
            .admits(&tampered, Some(RoomId(9)))
            .unwrap_err()
            .contains("not valid"));
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
