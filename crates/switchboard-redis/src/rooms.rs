//! Rooms processes in Redis: each one's number, address, load and rooms,
//! published by a task so that the matchmaker sees every process's rooms.
//!
//! Keys (`P` is the prefix):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `P:rooms:key`, `P:rooms:next_process`, `P:rooms:process:{n}`, `P:rooms:processes` | | the processes, as every kind has them (`service`) |
//! | `P:rooms:room:{id}` | hash, TTL [`PRESENCE_TTL`] | the room's summary, `process`, `private` |
//! | `P:rooms:list` | sorted set | the public rooms' ids |
//! | `P:rooms:room:{id}:seats` | sorted set | live reservations, scored by expiry |
//!
//! A process that dies stops refreshing its keys: within [`PRESENCE_TTL`]
//! it and its rooms are gone from the directory.

use std::collections::BTreeSet;

use switchboard_rooms::directory::{DirectoryLink, DirectorySnapshot};
use tokio::sync::mpsc;

use crate::service::{to_hex, Kind, Outage, Reach, Serving, PRESENCE_TTL, REFRESH_EVERY};
use crate::store::{RedisStore, StoreError};

/// The rooms servers of the service.
pub(crate) const ROOMS: Kind = Kind("rooms");

/// A rooms process joining the service's directory.
pub struct RoomsPresence;

impl RoomsPresence {
    /// Takes a process number and the service's key from Redis, and starts
    /// the task that publishes this process and its rooms once
    /// [`Serving::at`] says where it listens. Give the link to
    /// `RoomsLogic::with_directory`. Fails if Redis cannot be reached: a
    /// process cannot join a directory it cannot see.
    pub async fn join(store: RedisStore) -> Result<(DirectoryLink, Serving), StoreError> {
        let key = ROOMS.make_signing_key(&store).await?;
        let bits = 32 - switchboard_rooms::directory::ROOM_BITS;
        let process = ROOMS.next_process(&store, bits).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (serving, reach) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let Ok(reach) = reach.await else { return };
            let publisher = Publisher {
                store,
                process,
                key: to_hex(&key),
                reach,
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
    reach: Reach,
    latest: DirectorySnapshot,
    /// Room ids written last time (to delete those gone since).
    written: BTreeSet<u32>,
}

impl Publisher {
    async fn run(mut self, mut snapshots: mpsc::UnboundedReceiver<DirectorySnapshot>) {
        let mut refresh = tokio::time::interval(REFRESH_EVERY);
        let mut outage = Outage::new("rooms");
        loop {
            tokio::select! {
                snapshot = snapshots.recv() => match snapshot {
                    Some(snapshot) => self.latest = snapshot,
                    // The logic is gone: the process stops serving rooms.
                    None => return self.withdraw().await,
                },
                _ = refresh.tick() => {}
            }
            outage.record(self.write().await);
        }
    }

    /// Writes the process and every room, with fresh TTLs; deletes the
    /// rooms gone since the last write.
    async fn write(&mut self) -> Result<(), StoreError> {
        let ttl = PRESENCE_TTL.as_millis() as u64;
        let store = &self.store;
        let mut pipe = redis::pipe();
        let players = self.latest.players;
        ROOMS.present(
            &mut pipe,
            store,
            self.process,
            &self.reach,
            players,
            &self.key,
        );
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
        // Seats taken are members now: no longer held for anyone.
        for (room, nonce) in &self.latest.taken {
            pipe.cmd("ZREM")
                .arg(store.key(format_args!("rooms:room:{}:seats", room.0)))
                .arg(to_hex(nonce))
                .ignore();
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
        ROOMS.withdraw(&self.store, self.process).await;
    }
}
