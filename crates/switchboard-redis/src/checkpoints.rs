//! A game's checkpoints in Redis, so that another process can resume it
//! from its last completed turn. One key per game, `P:game:{game}:checkpoint`,
//! holding the latest checkpoint's bytes (the game's state in
//! `switchboard::scenario`'s format), kept for
//! [`RedisConfig::checkpoint_ttl`](crate::RedisConfig::checkpoint_ttl).

use switchboard::manager::{CheckpointStore, ShareError, ShareFuture};

use crate::store::{RedisStore, StoreError};

/// The longest game name (`a-z`, `A-Z`, `0-9`, `-`, `_`).
pub const MAX_GAME_NAME: usize = 64;

/// The checkpoints of one game: give it to `ManagerConfig::checkpoints`
/// (through `CheckpointHook::new`) in the process hosting the game, and
/// [`load`](Self::load) from it in the process that resumes it.
#[derive(Debug, Clone)]
pub struct RedisCheckpoints {
    store: RedisStore,
    key: String,
}

impl RedisCheckpoints {
    /// The checkpoints of `game`; its name must be 1 to [`MAX_GAME_NAME`]
    /// characters of `a-z`, `A-Z`, `0-9`, `-` and `_`.
    pub fn new(store: RedisStore, game: &str) -> Result<Self, StoreError> {
        let valid = (1..=MAX_GAME_NAME).contains(&game.len())
            && game
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(StoreError::InvalidName(format!(
                "{game:?}: game names are 1 to {MAX_GAME_NAME} characters of a-z, A-Z, 0-9, - and _"
            )));
        }
        let key = store.key(format_args!("game:{game}:checkpoint"));
        Ok(Self { store, key })
    }

    /// The key the checkpoint is kept under.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The latest checkpoint, if the game has one.
    pub async fn load(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let key = self.key.clone();
        self.store
            .run(|mut c| async move { redis::cmd("GET").arg(&key).query_async(&mut c).await })
            .await
    }

    /// Forgets the game's checkpoint (the game ended).
    pub async fn clear(&self) -> Result<(), StoreError> {
        let key = self.key.clone();
        self.store
            .run(|mut c| async move { redis::cmd("DEL").arg(&key).query_async::<()>(&mut c).await })
            .await
    }
}

impl CheckpointStore for RedisCheckpoints {
    fn save(&self, state: Vec<u8>) -> ShareFuture<'_, ()> {
        Box::pin(async move {
            let key = self.key.clone();
            let ttl = self.store.config().checkpoint_ttl.as_millis().max(1) as u64;
            self.store
                .run(|mut c| async move {
                    redis::cmd("SET")
                        .arg(&key)
                        .arg(state)
                        .arg("PX")
                        .arg(ttl)
                        .query_async::<()>(&mut c)
                        .await
                })
                .await
                .map_err(|err| ShareError(err.to_string()))
        })
    }
}
