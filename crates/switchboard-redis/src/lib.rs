//! Scale-out on Redis: the state that must outlive one process, shared by
//! several Switchboard processes so that they act as one service
//! (`docs/SCALING.md`).
//!
//! Single-process games keep the in-memory defaults; this crate is opt-in
//! (`--redis redis://host:6379/` on `switchboard-server`). Every decision
//! that checks a limit runs as one Lua script inside Redis (one round trip,
//! atomic across processes), and every call is bounded by
//! [`RedisConfig::response_timeout`]: when Redis is down or slow, a call
//! fails with a [`StoreError`] that says so, and what runs without Redis
//! (games in progress, connected players) goes on.
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | `calls` | [`calls`]: this process's calls to Redis, failures and latency, for `/metrics` ([`RedisCalls`]) |
//! | `store` | [`RedisConfig`], [`RedisStore`]: the connection, key names, timeouts, [`StoreError`]; [`RedisStore::restarts`], word that Redis came back or lost its data |
//! | `checkpoints` | [`RedisCheckpoints`]: a game's latest checkpoint (`ManagerConfig::checkpoints`), to resume it in another process |
//! | `lease` | [`GameLease`]: one server per named game, its checkpoints fenced by the lease, written again when Redis loses them |
//! | `rooms` | [`RoomsPresence`]: a rooms process in the directory (its number, address, load, rooms) |
//! | `zones` | [`RedisZones`]: which relay each zone lives on, and the relays' presence |
//! | `service` | what every kind of process shares: its signing key, process numbers, presence ([`Serving`]) |
//! | `directory` | [`RoomDirectory`]: the room directory read: every process's public rooms, the least-loaded process, seats held across readers (the matchmaker, `switchboard-matchmaker`, reads through it) |
//! | `registry` | [`RedisRegistry`]: the master's [`Registry`](switchboard_master::Registry) shared by several masters, expiry by Redis TTLs |
//! | `sessions` | [`RedisSessions`]: the manager's sessions shared by several processes (`ManagerConfig::shared_sessions`) |
//! | [`testing`] | [`testing::RedisProcess`]: a real `redis-server` on a free port, for tests |

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod calls;
mod checkpoints;
mod directory;
mod lease;
mod registry;
mod rooms;
mod service;
mod sessions;
mod store;
pub mod testing;
mod zones;

pub use calls::{calls, RedisCalls};
pub use checkpoints::{RedisCheckpoints, MAX_GAME_NAME};
pub use directory::{ProcessReach, RoomDirectory, SeatAsk, SeatRefusal};
pub use lease::GameLease;
pub use registry::RedisRegistry;
pub use rooms::RoomsPresence;
pub use service::{Serving, PRESENCE_TTL, REFRESH_EVERY};
pub use sessions::RedisSessions;
pub use store::{RedisConfig, RedisStore, StoreError};
pub use zones::{RedisZones, ZONE_TTL};
