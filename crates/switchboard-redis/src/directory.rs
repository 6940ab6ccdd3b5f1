//! [`RoomDirectory`]: the room directory in Redis as a matchmaker reads it
//! (the keys of `rooms`): the public rooms of every live process, the
//! live processes by load, where each is reached, and seats held in a room
//! counted across every reader.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use redis::Script;
use switchboard::tls::Fingerprint;
use switchboard_rooms::protocol::{RoomId, RoomSummary};

use crate::rooms::ROOMS;
use crate::service::to_hex;
use crate::store::{RedisStore, StoreError};

/// KEYS: the room's hash, its seats, the asker's live reservations. ARGV:
/// the reservation's nonce (hex), its time to live (ms), the asker's cap,
/// the prefix of a room's key, the room's number. {'ok', process} or
/// {'refused', why} (`missing`, `locked`, `started`, `full`: [`SeatRefusal`]). Past the cap, the asker's oldest live reservation gives
/// its seat back before this one is counted.
const RESERVE: &str = r#"
local r = redis.call('HMGET', KEYS[1], 'players', 'max', 'locked', 'started', 'process')
if not r[5] then return {'refused', 'missing'} end
if r[3] == '1' then return {'refused', 'locked'} end
if r[4] == '1' then return {'refused', 'started'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
while redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[3]) do
  local oldest = redis.call('ZPOPMIN', KEYS[3])
  local room, nonce = string.match(oldest[1], '^(%d+):(%x+)$')
  if room then redis.call('ZREM', ARGV[4] .. room .. ':seats', nonce) end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if tonumber(r[1]) + redis.call('ZCARD', KEYS[2]) >= tonumber(r[2]) then
  return {'refused', 'full'}
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[5] .. ':' .. ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return {'ok', r[5]}
"#;

/// Why a room gives no seat ([`RoomDirectory::hold_seat`]); its text is
/// what the player is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SeatRefusal {
    /// No room by that number is listed (it never was, or its process died).
    #[error("no such room")]
    NoSuchRoom,
    /// Its host locked it.
    #[error("that room is locked")]
    Locked,
    /// Its game has started.
    #[error("the game in that room has started")]
    Started,
    /// Its players and the seats held for others fill it.
    #[error("that room is full")]
    Full,
    /// Its entry in the directory names no process (damaged).
    #[error("room {0} names no process")]
    NoProcess(u32),
}

/// Where a live rooms process takes players.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessReach {
    /// Its number in the service.
    pub process: u32,
    /// Its address, as clients dial it (`host:port`).
    pub addr: String,
    /// The fingerprint of the key it presents to other machines, if it
    /// speaks TLS.
    pub fingerprint: Option<Fingerprint>,
}

/// A seat one asker asked for in one room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeatAsk {
    /// The room.
    pub room: RoomId,
    /// Who asks (an address key: an IPv6 /64 counts as one).
    pub asker: IpAddr,
    /// The reservation's nonce: the seat is counted under it.
    pub nonce: [u8; switchboard::token::NONCE_LEN],
    /// How long the seat is held.
    pub ttl: Duration,
    /// Live seats one asker holds at most; past it, its oldest gives its
    /// seat back.
    pub max_per_asker: usize,
}

/// The room directory of a service, read (the rooms processes write it:
/// [`RoomsPresence`](crate::RoomsPresence)). It keeps nothing of its own:
/// any number of readers share one directory.
#[derive(Debug, Clone)]
pub struct RoomDirectory {
    store: RedisStore,
    reserve: Script,
}

impl RoomDirectory {
    /// The directory in `store`.
    pub fn new(store: RedisStore) -> Self {
        Self {
            store,
            reserve: Script::new(RESERVE),
        }
    }

    /// The key the rooms processes seal reservations with; `None` until a
    /// rooms process has joined.
    pub async fn signing_key(&self) -> Result<Option<[u8; 32]>, StoreError> {
        ROOMS.read_signing_key(&self.store).await
    }

    /// The public rooms of every live process, at most `max`.
    pub async fn list(&self, max: usize) -> Result<Vec<RoomSummary>, StoreError> {
        let list = self.store.key("rooms:list");
        let last = max.max(1) as isize - 1;
        let ids: Vec<u32> = self
            .store
            .run(|mut c| async move {
                redis::cmd("ZRANGE")
                    .arg(&list)
                    .arg(0)
                    .arg(last)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.cmd("HGETALL")
                .arg(self.store.key(format_args!("rooms:room:{id}")));
        }
        let rooms: Vec<HashMap<String, String>> = self
            .store
            .run(|mut c| async move { pipe.query_async(&mut c).await })
            .await?;
        let mut listed = Vec::with_capacity(rooms.len());
        let mut gone = Vec::new();
        for (id, room) in ids.into_iter().zip(rooms) {
            match summary(id, &room) {
                Some(summary) => listed.push(summary),
                // Its process died (the hash expired): clean the list up.
                None => gone.push(id),
            }
        }
        if !gone.is_empty() {
            let list = self.store.key("rooms:list");
            let _ = self
                .store
                .run(|mut c| async move {
                    redis::cmd("ZREM")
                        .arg(&list)
                        .arg(&gone)
                        .query_async::<()>(&mut c)
                        .await
                })
                .await;
        }
        Ok(listed)
    }

    /// The live process with the fewest players; `None` if none is live.
    /// A process whose presence expired is taken out of the running.
    pub async fn least_loaded(&self) -> Result<Option<ProcessReach>, StoreError> {
        for process in self.processes().await? {
            if let Some(reach) = self.reach(process).await? {
                return Ok(Some(reach));
            }
            let processes = ROOMS.key(&self.store, "processes");
            let _ = self
                .store
                .run(|mut c| async move {
                    redis::cmd("ZREM")
                        .arg(&processes)
                        .arg(process)
                        .query_async::<()>(&mut c)
                        .await
                })
                .await;
        }
        Ok(None)
    }

    /// The live process that takes players at `addr` (as it published
    /// itself: `host:port`); `None` if none does. One call per process: for
    /// a matchmaker placing a match on a server it was handed by address
    /// (an Agones allocation).
    pub async fn reach_at(&self, addr: &str) -> Result<Option<ProcessReach>, StoreError> {
        for process in self.processes().await? {
            if let Some(reach) = self.reach(process).await? {
                if reach.addr == addr {
                    return Ok(Some(reach));
                }
            }
        }
        Ok(None)
    }

    /// The processes of the service, the least loaded first.
    async fn processes(&self) -> Result<Vec<u32>, StoreError> {
        let processes = ROOMS.key(&self.store, "processes");
        self.store
            .run(|mut c| async move {
                redis::cmd("ZRANGE")
                    .arg(&processes)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut c)
                    .await
            })
            .await
    }

    /// Holds a seat in `ask.room`, counted in Redis with the room's
    /// members and against the asker's live seats: the number of the
    /// room's process, or why not (no such room, locked, started, full).
    pub async fn hold_seat(&self, ask: SeatAsk) -> Result<Result<u32, SeatRefusal>, StoreError> {
        let room = ask.room.0;
        let mut invocation = self.reserve.prepare_invoke();
        invocation
            .key(self.store.key(format_args!("rooms:room:{room}")))
            .key(self.store.key(format_args!("rooms:room:{room}:seats")))
            .key(self.store.key(format_args!("rooms:held:{}", ask.asker)))
            .arg(to_hex(&ask.nonce))
            .arg(ask.ttl.as_millis() as u64)
            .arg(ask.max_per_asker.max(1))
            .arg(self.store.key("rooms:room:"))
            .arg(room);
        let (verdict, detail): (String, String) = self
            .store
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        if verdict != "ok" {
            return Ok(Err(match detail.as_str() {
                "missing" => SeatRefusal::NoSuchRoom,
                "locked" => SeatRefusal::Locked,
                "started" => SeatRefusal::Started,
                "full" => SeatRefusal::Full,
                other => return Err(StoreError::Corrupt(format!("a seat refused as {other:?}"))),
            }));
        }
        Ok(detail.parse().map_err(|_| SeatRefusal::NoProcess(room)))
    }

    /// Where live process `process` takes players; `None` if it is gone.
    pub async fn reach(&self, process: u32) -> Result<Option<ProcessReach>, StoreError> {
        let key = ROOMS.key(&self.store, format_args!("process:{process}"));
        let (addr, tls): (Option<String>, Option<String>) = self
            .store
            .run(|mut c| async move {
                redis::cmd("HMGET")
                    .arg(&key)
                    .arg("addr")
                    .arg("tls")
                    .query_async(&mut c)
                    .await
            })
            .await?;
        let fingerprint = tls.and_then(|fingerprint| fingerprint.parse::<Fingerprint>().ok());
        Ok(addr.map(|addr| ProcessReach {
            process,
            addr,
            fingerprint,
        }))
    }
}

/// A room's summary from its hash; `None` if the hash is gone or damaged.
fn summary(id: u32, room: &HashMap<String, String>) -> Option<RoomSummary> {
    let number = |field: &str| room.get(field)?.parse::<u8>().ok();
    Some(RoomSummary {
        id: RoomId(id),
        name: room.get("name")?.clone(),
        players: number("players")?,
        max_players: number("max")?,
        metadata: serde_json::from_str(room.get("metadata")?).ok()?,
        locked: number("locked")? == 1,
        started: number("started")? == 1,
    })
}
