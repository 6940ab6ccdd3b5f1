//! One owner per game: a named game's server holds a lease in Redis
//! (`P:game:{game}:lease`, its random token, expiring after
//! [`GameLease::ttl`] unless renewed every third of it). A second server
//! for the same game waits until the lease lapses or is released; the
//! holder's checkpoint writes are **fenced**: a script writes one only
//! while the lease is still the writer's, so a server that lost its lease
//! (paused, cut off) can never overwrite its successor's game.
//!
//! ```text
//!  acquire: SET lease token NX PX ttl ──▶ held (fence = INCR)      else wait, ask again every ttl/10
//!  keep:    every ttl/3 (and at once when Redis comes back or restarted empty):
//!           lease == token ─▶ PEXPIRE            (renewed)
//!           lease missing  ─▶ SET again, write the last checkpoint again  (Redis lost it)
//!           lease other's  ─▶ lost: the server stops serving
//!  save:    lease == token ─▶ SET checkpoint      else refused
//!  release: lease == token ─▶ DEL                 (a clean stop: the successor need not wait)
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Script;
use switchboard::manager::{CheckpointStore, ShareError, ShareFuture};
use tokio_util::sync::CancellationToken;

use crate::checkpoints::RedisCheckpoints;
use crate::store::{RedisStore, StoreError};

/// KEYS: lease, fence. ARGV: token, ttl (ms). The fence number, or 0 when
/// another holds the lease.
const ACQUIRE: &str = r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"#;

/// KEYS: lease. ARGV: token, ttl (ms). 1 renewed, 2 taken again (it was
/// gone), 0 another's.
const RENEW: &str = r#"
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0
"#;

/// KEYS: lease, checkpoint. ARGV: token, state, ttl (ms). 1 written, 0 not
/// the lease's holder.
const SAVE: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
"#;

/// KEYS: lease. ARGV: token.
const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"#;

/// A game's lease, held by this process (cheap to clone).
#[derive(Debug, Clone)]
pub struct GameLease {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: RedisStore,
    game: String,
    lease_key: String,
    checkpoints: RedisCheckpoints,
    token: String,
    fence: u64,
    ttl: Duration,
    /// The latest checkpoint the game asked to keep: written again when
    /// Redis loses it.
    last: Mutex<Option<Vec<u8>>>,
    /// The scripts, hashed once.
    renew: Script,
    save: Script,
    release: Script,
    lost: CancellationToken,
    /// Let go on purpose (not lost).
    released: std::sync::atomic::AtomicBool,
}

impl GameLease {
    /// The default lease time: a dead server's game is free again within
    /// it (1 s; renewed every third of it).
    pub const DEFAULT_TTL: Duration = Duration::from_secs(1);

    /// Takes `game`'s lease if it is free; `None` while another server
    /// holds it.
    pub async fn try_acquire(
        store: &RedisStore,
        game: &str,
        ttl: Duration,
    ) -> Result<Option<GameLease>, StoreError> {
        let checkpoints = RedisCheckpoints::new(store.clone(), game)?;
        let lease_key = store.key(format_args!("game:{game}:lease"));
        let fence_key = store.key(format_args!("game:{game}:fence"));
        let token = crate::service::to_hex(&switchboard::session::ticket::nonce());
        let ttl_ms = ttl.as_millis().max(1) as u64;
        let script = Script::new(ACQUIRE);
        let mut call = script.prepare_invoke();
        call.key(&lease_key).key(&fence_key).arg(&token).arg(ttl_ms);
        let fence: u64 = store
            .run(|mut c| async move { call.invoke_async(&mut c).await })
            .await?;
        if fence == 0 {
            return Ok(None);
        }
        tracing::info!(game, fence, "game lease taken");
        Ok(Some(GameLease {
            inner: Arc::new(Inner {
                store: store.clone(),
                game: game.to_string(),
                lease_key,
                checkpoints,
                token,
                fence,
                ttl,
                last: Mutex::new(None),
                renew: Script::new(RENEW),
                save: Script::new(SAVE),
                release: Script::new(RELEASE),
                lost: CancellationToken::new(),
                released: Default::default(),
            }),
        }))
    }

    /// Waits for `game`'s lease and takes it, asking every tenth of `ttl`
    /// (a standby server takes a crashed one's game within about `ttl`);
    /// `waiting` runs once if another server holds it. A failing Redis ends
    /// the wait with its error.
    pub async fn acquire(
        store: &RedisStore,
        game: &str,
        ttl: Duration,
        waiting: impl FnOnce(),
    ) -> Result<GameLease, StoreError> {
        let mut waiting = Some(waiting);
        loop {
            if let Some(lease) = Self::try_acquire(store, game, ttl).await? {
                return Ok(lease);
            }
            if let Some(waiting) = waiting.take() {
                waiting();
            }
            tokio::time::sleep((ttl / 10).max(Duration::from_millis(10))).await;
        }
    }

    /// The game's name.
    pub fn game(&self) -> &str {
        &self.inner.game
    }

    /// This holder's fence number: each new holder of the game's lease gets
    /// a higher one (for logs; the fencing itself compares tokens in Redis).
    pub fn fence(&self) -> u64 {
        self.inner.fence
    }

    /// How long the lease lives without renewal.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// The game's latest checkpoint in Redis, if it has one (remembered,
    /// to be written again if Redis loses it before the next save).
    pub async fn load(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let saved = self.inner.checkpoints.load().await?;
        if saved.is_some() {
            *self.inner.last.lock().expect("last lock") = saved.clone();
        }
        Ok(saved)
    }

    /// Writes `state` as the game's checkpoint, while the lease is ours.
    pub async fn save_checkpoint(&self, state: Vec<u8>) -> Result<(), StoreError> {
        *self.inner.last.lock().expect("last lock") = Some(state.clone());
        self.write(state).await
    }

    async fn write(&self, state: Vec<u8>) -> Result<(), StoreError> {
        let inner = &self.inner;
        let ttl = inner.store.config().checkpoint_ttl.as_millis().max(1) as u64;
        let mut call = inner.save.prepare_invoke();
        call.key(&inner.lease_key)
            .key(inner.checkpoints.key())
            .arg(&inner.token)
            .arg(state)
            .arg(ttl);
        let written: u8 = inner
            .store
            .run(|mut c| async move { call.invoke_async(&mut c).await })
            .await?;
        match written {
            1 => Ok(()),
            _ => Err(StoreError::Unavailable(format!(
                "the lease of game {} is not this server's: checkpoint not written",
                inner.game
            ))),
        }
    }

    /// Keeps the lease: renews it every third of its time, and at once
    /// when Redis comes back or restarted empty (then the lease and the
    /// last checkpoint are written again, and the log says so once). Runs
    /// on the current runtime until the lease is released or lost;
    /// `on_lost` runs if another server took it over (this one must stop
    /// serving the game: a server's `ManagerHandle::shutdown`, say).
    pub fn keep(&self, on_lost: impl FnOnce() + Send + 'static) {
        let lease = self.clone();
        tokio::spawn(async move { lease.keep_up().await });
        let lease = self.clone();
        tokio::spawn(async move {
            lease.lost().await;
            if !lease
                .inner
                .released
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                on_lost();
            }
        });
    }

    async fn keep_up(self) {
        let inner = &self.inner;
        let mut restarts = Some(inner.store.restarts());
        let mut every = tokio::time::interval((inner.ttl / 3).max(Duration::from_millis(10)));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut outage = switchboard::session::Outage::new("game lease");
        loop {
            let restarted = async {
                match &mut restarts {
                    Some(watch) => watch.changed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = every.tick() => {}
                changed = restarted => {
                    if changed.is_err() {
                        // The probe is gone (its runtime stopped): the
                        // renewals alone keep the lease.
                        restarts = None;
                        continue;
                    }
                }
                _ = inner.lost.cancelled() => return,
            }
            let ttl_ms = inner.ttl.as_millis().max(1) as u64;
            let mut call = inner.renew.prepare_invoke();
            call.key(&inner.lease_key).arg(&inner.token).arg(ttl_ms);
            let renewed: Result<u8, StoreError> = inner
                .store
                .run(|mut c| async move { call.invoke_async(&mut c).await })
                .await;
            match renewed {
                Err(err) => {
                    outage.failed(&err);
                    continue;
                }
                Ok(_) => {
                    outage.succeeded();
                }
            }
            match renewed {
                Ok(1) => {}
                Ok(2) => {
                    let last = inner.last.lock().expect("last lock").clone();
                    let written = match last {
                        Some(state) => self.write(state).await.map(|()| "its checkpoint"),
                        None => Ok("no checkpoint yet"),
                    };
                    match written {
                        Ok(what) => tracing::warn!(
                            game = %inner.game,
                            "Redis had lost the game's lease (restarted empty?): taken again, {what} written again"
                        ),
                        Err(err) => {
                            tracing::warn!(game = %inner.game, %err, "lease taken again; checkpoint not yet written again")
                        }
                    }
                }
                _ => {
                    tracing::error!(
                        game = %inner.game,
                        "another server holds the game's lease now: this one stops serving it"
                    );
                    inner.lost.cancel();
                    return;
                }
            }
        }
    }

    /// Completes when another server took the lease over (this one must
    /// stop serving the game).
    pub async fn lost(&self) {
        self.inner.lost.cancelled().await
    }

    /// Lets the lease go (a clean stop): a waiting server takes the game
    /// over at once instead of after the lease time.
    pub async fn release(&self) -> Result<(), StoreError> {
        self.inner
            .released
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.inner.lost.cancel();
        let inner = &self.inner;
        let mut call = inner.release.prepare_invoke();
        call.key(&inner.lease_key).arg(&inner.token);
        inner
            .store
            .run(|mut c| async move { call.invoke_async::<u8>(&mut c).await })
            .await
            .map(drop)
    }
}

/// A game's checkpoints through its lease: written only while the lease is
/// this server's.
impl CheckpointStore for GameLease {
    fn save(&self, state: Vec<u8>) -> ShareFuture<'_, ()> {
        Box::pin(async move {
            self.save_checkpoint(state)
                .await
                .map_err(|err| ShareError(err.to_string()))
        })
    }
}
