//! Rooms processes in Redis: each one's number, address, load and rooms,
//! published by a task so that the matchmaker sees every process's rooms.
//!
//! Keys (`P` is the prefix):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `P:rooms:key` | string | the service's reservation signing key (hex), made by the first process |
//! | `P:rooms:next_process` | counter | the last process number given |
//! | `P:rooms:process:{n}` | hash, TTL [`PRESENCE_TTL`] | `addr`, `players`, `rooms` |
//! | `P:rooms:processes` | sorted set | process numbers by players (the least-loaded first) |
//! | `P:rooms:room:{id}` | hash, TTL [`PRESENCE_TTL`] | the room's summary, `process`, `private` |
//! | `P:rooms:list` | sorted set | the public rooms' ids |
//! | `P:rooms:room:{id}:seats` | sorted set | live reservations, scored by expiry |
//!
//! A process that dies stops refreshing its keys: within [`PRESENCE_TTL`]
//! it and its rooms are gone from the directory.

use std::collections::BTreeSet;
use std::time::Duration;

use switchboard_rooms::directory::{DirectoryLink, DirectorySnapshot};
use tokio::sync::mpsc;

use crate::store::{RedisStore, StoreError};

/// How long a process and its rooms stay listed without a refresh.
pub const PRESENCE_TTL: Duration = Duration::from_secs(3);

/// How often a process refreshes its presence (and writes its rooms).
pub const REFRESH_EVERY: Duration = Duration::from_secs(1);

/// The service's reservation key, made (32 random bytes) by the first
/// rooms process; each process writes it again (if missing) at every
/// refresh, so a Redis that restarted empty gets it back.
async fn make_service_key(store: &RedisStore) -> Result<[u8; 32], StoreError> {
    let mut fresh = [0u8; 32];
    getrandom::fill(&mut fresh).expect("the OS random source failed");
    let key = store.key("rooms:key");
    store
        .run(|mut c| async move {
            redis::cmd("SET")
                .arg(&key)
                .arg(to_hex(&fresh))
                .arg("NX")
                .query_async::<()>(&mut c)
                .await
        })
        .await?;
    read_service_key(store)
        .await?
        .ok_or_else(|| StoreError::Corrupt("the rooms key vanished".into()))
}

/// The service's reservation key, once a rooms process made it.
pub(crate) async fn read_service_key(store: &RedisStore) -> Result<Option<[u8; 32]>, StoreError> {
    let key = store.key("rooms:key");
    let hex: Option<String> = store
        .run(|mut c| async move { redis::cmd("GET").arg(&key).query_async(&mut c).await })
        .await?;
    match hex {
        None => Ok(None),
        Some(hex) => from_hex(&hex)
            .map(Some)
            .ok_or_else(|| StoreError::Corrupt("the rooms key is not 32 hex bytes".into())),
    }
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(hex: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if hex.len() != 64 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// A rooms process joining the service's directory.
pub struct RoomsPresence;

/// Tells the publisher where clients reach the process, once it listens:
/// nothing is published before.
#[derive(Debug)]
pub struct Serving(tokio::sync::oneshot::Sender<String>);

impl Serving {
    /// The process takes clients at `addr` (`host:port`, as clients dial
    /// it).
    pub fn at(self, addr: impl Into<String>) {
        let _ = self.0.send(addr.into());
    }
}

impl RoomsPresence {
    /// Takes a process number and the service's key from Redis, and starts
    /// the task that publishes this process and its rooms once
    /// [`Serving::at`] says where it listens. Give the link to
    /// `RoomsLogic::with_directory`. Fails if Redis cannot be reached: a
    /// process cannot join a directory it cannot see.
    pub async fn join(store: RedisStore) -> Result<(DirectoryLink, Serving), StoreError> {
        let key = make_service_key(&store).await?;
        let counter = store.key("rooms:next_process");
        let process: u32 = store
            .run(|mut c| async move { redis::cmd("INCR").arg(&counter).query_async(&mut c).await })
            .await?;
        if process >= 1 << (32 - switchboard_rooms::directory::ROOM_BITS) {
            return Err(StoreError::Corrupt(format!(
                "process number {process} is past the last one"
            )));
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let (serving, addr) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let Ok(addr) = addr.await else { return };
            let publisher = Publisher {
                store,
                process,
                key: to_hex(&key),
                addr,
                latest: DirectorySnapshot::default(),
                written: BTreeSet::new(),
            };
            publisher.run(rx).await;
        });
        Ok((DirectoryLink::new(process, key, tx), Serving(serving)))
    }
}

struct Publisher {
    store: RedisStore,
    process: u32,
    /// The service's key, hex.
    key: String,
    addr: String,
    latest: DirectorySnapshot,
    /// Room ids written last time (to delete those gone since).
    written: BTreeSet<u32>,
}

impl Publisher {
    async fn run(mut self, mut snapshots: mpsc::UnboundedReceiver<DirectorySnapshot>) {
        let mut refresh = tokio::time::interval(REFRESH_EVERY);
        let mut failing = false;
        loop {
            tokio::select! {
                snapshot = snapshots.recv() => match snapshot {
                    Some(snapshot) => self.latest = snapshot,
                    // The logic is gone: the process stops serving rooms.
                    None => return self.withdraw().await,
                },
                _ = refresh.tick() => {}
            }
            match self.write().await {
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("room directory reachable again");
                }
                Ok(()) => {}
                Err(err) if !failing => {
                    failing = true;
                    tracing::warn!(%err, "rooms not published; games go on, retrying");
                }
                Err(_) => {}
            }
        }
    }

    /// Writes the process and every room, with fresh TTLs; deletes the
    /// rooms gone since the last write.
    async fn write(&mut self) -> Result<(), StoreError> {
        let ttl = PRESENCE_TTL.as_millis() as u64;
        let store = &self.store;
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(store.key("rooms:key"))
            .arg(&self.key)
            .arg("NX")
            .ignore();
        let process_key = store.key(format_args!("rooms:process:{}", self.process));
        pipe.cmd("HSET")
            .arg(&process_key)
            .arg("addr")
            .arg(&self.addr)
            .arg("players")
            .arg(self.latest.players)
            .arg("rooms")
            .arg(self.latest.rooms.len())
            .ignore();
        pipe.cmd("PEXPIRE").arg(&process_key).arg(ttl).ignore();
        pipe.cmd("ZADD")
            .arg(store.key("rooms:processes"))
            .arg(self.latest.players)
            .arg(self.process)
            .ignore();
        let list = store.key("rooms:list");
        let mut now = BTreeSet::new();
        for record in &self.latest.rooms {
            let room = &record.summary;
            now.insert(room.id.0);
            let key = store.key(format_args!("rooms:room:{}", room.id.0));
            let metadata = serde_json::to_string(&room.metadata).unwrap_or_default();
            pipe.cmd("HSET")
                .arg(&key)
                .arg("name")
                .arg(&room.name)
                .arg("players")
                .arg(room.players)
                .arg("max")
                .arg(room.max_players)
                .arg("locked")
                .arg(u8::from(room.locked))
                .arg("started")
                .arg(u8::from(room.started))
                .arg("private")
                .arg(u8::from(record.private))
                .arg("process")
                .arg(self.process)
                .arg("metadata")
                .arg(metadata)
                .ignore();
            pipe.cmd("PEXPIRE").arg(&key).arg(ttl).ignore();
            if !record.private {
                pipe.cmd("ZADD")
                    .arg(&list)
                    .arg(room.id.0)
                    .arg(room.id.0)
                    .ignore();
            }
        }
        for gone in self.written.difference(&now) {
            pipe.cmd("DEL")
                .arg(store.key(format_args!("rooms:room:{gone}")))
                .ignore();
            pipe.cmd("ZREM").arg(&list).arg(gone).ignore();
        }
        store
            .run(|mut c| async move { pipe.query_async::<()>(&mut c).await })
            .await?;
        self.written = now;
        Ok(())
    }

    /// The process stops: its rooms and presence leave the directory now
    /// rather than at their TTL.
    async fn withdraw(mut self) {
        self.latest = DirectorySnapshot::default();
        let _ = self.write().await;
        let process = self.process;
        let keys = (
            self.store.key(format_args!("rooms:process:{process}")),
            self.store.key("rooms:processes"),
        );
        let _ = self
            .store
            .run(|mut c| async move {
                redis::pipe()
                    .cmd("DEL")
                    .arg(&keys.0)
                    .ignore()
                    .cmd("ZREM")
                    .arg(&keys.1)
                    .arg(process)
                    .ignore()
                    .query_async::<()>(&mut c)
                    .await
            })
            .await;
    }
}
