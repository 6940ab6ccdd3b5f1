//! Sessions in Redis, shared by every manager that opens the same Redis and
//! prefix: a client whose process died reconnects to another one and keeps
//! its id.
//!
//! One hash per session, `P:session:{id}`: `name`, `from`, `reconnects`,
//! `token` (SHA-256 of the current reconnect token, hex: Redis never holds
//! a token a client could present), `owner` (the process holding it),
//! `state` (`online`/`offline`). Its TTL is the grace period: renewed while
//! its process lives, so it outlives a dead process by one grace period.

use std::net::IpAddr;
use std::time::Duration;

use redis::Script;
use sha2::{Digest, Sha256};
use switchboard::manager::{SessionShare, ShareError, ShareFuture, ShareUpdate, SharedSession};
use switchboard::session::ReconnectToken;
use switchboard::ClientId;

use crate::service::to_hex;
use crate::store::RedisStore;

/// KEYS[1]: the session. ARGV: token hash, new token hash, owner, grace ms.
/// The session, taken over with its token rotated, or nil.
const CLAIM: &str = r#"
local s = redis.call('HMGET', KEYS[1], 'token', 'name', 'from', 'reconnects')
if not s[1] or s[1] ~= ARGV[1] then return false end
local reconnects = tonumber(s[4]) + 1
redis.call('HSET', KEYS[1], 'token', ARGV[2], 'owner', ARGV[3], 'state', 'online',
  'reconnects', reconnects)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {s[2], s[3], tostring(reconnects)}
"#;

/// KEYS: one session per update. ARGV: owner, grace ms, then five per
/// update: op, token hash, name, from, reconnects. Returns the sessions
/// another owner holds (not written).
const APPLY: &str = r#"
local owner, grace = ARGV[1], ARGV[2]
local moved = {}
for i, key in ipairs(KEYS) do
  local at = 2 + (i - 1) * 5
  local op = ARGV[at + 1]
  local holder = redis.call('HGET', key, 'owner')
  if holder and holder ~= owner then
    if op == 'online' then table.insert(moved, key) end
  elseif op == 'online' then
    redis.call('HSET', key, 'token', ARGV[at + 2], 'name', ARGV[at + 3], 'from', ARGV[at + 4],
      'reconnects', ARGV[at + 5], 'owner', owner, 'state', 'online')
    redis.call('PEXPIRE', key, grace)
  elseif op == 'offline' and holder then
    redis.call('HSET', key, 'state', 'offline')
    redis.call('PEXPIRE', key, grace)
  elseif op == 'gone' then
    redis.call('DEL', key)
  end
end
return moved
"#;

/// [`SessionShare`] on Redis: give it to `ManagerConfig::shared_sessions`
/// (through `SharedSessionsHook::new`) in every process of a service.
pub struct RedisSessions {
    store: RedisStore,
    /// This process, as the `owner` of the sessions it holds.
    owner: String,
    claim: Script,
    apply: Script,
}

impl std::fmt::Debug for RedisSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSessions")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl RedisSessions {
    /// Sessions in `store`, held by this process under a fresh random
    /// owner id.
    pub fn new(store: RedisStore) -> Self {
        Self {
            store,
            owner: uuid::Uuid::new_v4().to_string(),
            claim: Script::new(CLAIM),
            apply: Script::new(APPLY),
        }
    }

    fn key(&self, client: ClientId) -> String {
        self.store.key(format_args!("session:{client}"))
    }

    fn client_of_key(&self, key: &str) -> Option<ClientId> {
        let id = key.strip_prefix(&self.key_prefix())?;
        id.parse().ok().map(ClientId)
    }

    fn key_prefix(&self) -> String {
        self.store.key("session:")
    }
}

fn hash(token: &ReconnectToken) -> String {
    to_hex(&Sha256::digest(token.0))
}

fn millis(grace: Duration) -> u64 {
    grace.as_millis().max(1) as u64
}

fn share_error(err: crate::StoreError) -> ShareError {
    ShareError(err.to_string())
}

impl SessionShare for RedisSessions {
    fn claim<'a>(
        &'a self,
        client: ClientId,
        token: &'a ReconnectToken,
        new_token: &'a ReconnectToken,
        grace: Duration,
    ) -> ShareFuture<'a, Option<SharedSession>> {
        Box::pin(async move {
            let mut invocation = self.claim.key(self.key(client));
            invocation
                .arg(hash(token))
                .arg(hash(new_token))
                .arg(&self.owner)
                .arg(millis(grace));
            let found: Option<(String, String, u32)> = self
                .store
                .run(|mut c| async move { invocation.invoke_async(&mut c).await })
                .await
                .map_err(share_error)?;
            let Some((name, from, reconnects)) = found else {
                return Ok(None);
            };
            let from: IpAddr = from
                .parse()
                .map_err(|_| ShareError(format!("session {client} holds a bad address")))?;
            Ok(Some(SharedSession {
                client,
                name,
                from,
                reconnects,
            }))
        })
    }

    fn apply(&self, updates: Vec<ShareUpdate>, grace: Duration) -> ShareFuture<'_, Vec<ClientId>> {
        Box::pin(async move {
            if updates.is_empty() {
                return Ok(Vec::new());
            }
            let mut invocation = self.apply.prepare_invoke();
            invocation.arg(&self.owner).arg(millis(grace));
            for update in &updates {
                let (client, op, token, name, from, reconnects) = match update {
                    ShareUpdate::Online { session, token } => (
                        session.client,
                        "online",
                        hash(token),
                        session.name.clone(),
                        session.from.to_string(),
                        session.reconnects,
                    ),
                    ShareUpdate::Offline { client } => (
                        *client,
                        "offline",
                        String::new(),
                        String::new(),
                        String::new(),
                        0,
                    ),
                    ShareUpdate::Gone { client } => (
                        *client,
                        "gone",
                        String::new(),
                        String::new(),
                        String::new(),
                        0,
                    ),
                };
                invocation
                    .key(self.key(client))
                    .arg(op)
                    .arg(token)
                    .arg(name)
                    .arg(from)
                    .arg(reconnects);
            }
            let moved: Vec<String> = self
                .store
                .run(|mut c| async move { invocation.invoke_async(&mut c).await })
                .await
                .map_err(share_error)?;
            Ok(moved
                .iter()
                .filter_map(|key| self.client_of_key(key))
                .collect())
        })
    }

    fn restarts(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.store.restarts())
    }
}
