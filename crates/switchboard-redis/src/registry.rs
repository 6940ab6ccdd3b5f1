//! The master's registry in Redis, so that several masters list the same
//! servers.
//!
//! Keys (`P` is [`RedisConfig::prefix`](crate::RedisConfig::prefix)):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `P:master:servers` | sorted set | each listed address, scored by when it was last heard (ms, Redis's clock) |
//! | `P:master:info:{addr}` | string, TTL = expiry | the server's info as JSON; Redis drops it when the server falls silent |
//! | `P:master:ip:{ip}` | sorted set, TTL = expiry | the listed addresses on one IP, for `max_servers_per_address` |
//!
//! Time is Redis's (`TIME` inside the scripts), so masters whose clocks
//! differ agree on who expired. The `now` the master passes is not used.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use redis::Script;
use switchboard_master::{
    page_of, Filter, Heard, Limits, ListPage, ListRequest, Listed, Registry, RegistryError,
    ServerInfo, Upserted,
};

use crate::store::{RedisStore, StoreError};

/// Reads Redis's clock and forgets entries older than the expiry (ARGV[2],
/// ms) in the two sorted sets (KEYS[1], KEYS[3]). A server refreshed now
/// is scored `grace` (ARGV[5], ms) ahead, so it lives that much longer (a
/// Torque server), and its keys live `expiry + grace`.
const PRELUDE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = tonumber(ARGV[2])
local grace = tonumber(ARGV[5])
local life = expiry + grace
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - expiry))
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. (now - expiry))
local function refresh()
  redis.call('ZADD', KEYS[1], now + grace, ARGV[1])
  redis.call('ZADD', KEYS[3], now + grace, ARGV[1])
  if redis.call('PTTL', KEYS[3]) < life then redis.call('PEXPIRE', KEYS[3], life) end
end
local function room()
  if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 'full' end
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then return 'ip_full' end
  return nil
end
"#;

/// KEYS: servers, info, ip. ARGV: addr, expiry ms, max servers, max per IP,
/// grace ms.
const HEARTBEAT: &str = r#"
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[2], life)
  refresh()
  return 'listed'
end
return room() or 'new'
"#;

/// As HEARTBEAT, and ARGV[6]: the info as JSON.
const UPSERT: &str = r#"
local listed = redis.call('EXISTS', KEYS[2]) == 1
if not listed then
  local refused = room()
  if refused then return refused end
end
redis.call('SET', KEYS[2], ARGV[6], 'PX', life)
refresh()
if listed then return 'refreshed' end
return 'added'
"#;

/// KEYS: servers. ARGV: expiry ms. Returns {expired, still listed}.
const EXPIRE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gone = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ARGV[1])))
return {gone, redis.call('ZCARD', KEYS[1])}
"#;

/// Addresses read per MGET while listing.
const READ_CHUNK: usize = 500;

/// The master's [`Registry`] in Redis, shared by every master that opens the
/// same Redis and prefix. A server that heartbeats to any of them is listed
/// by all; the registry's size and per-IP limits hold across them (checked
/// and applied in one script); a silent server's info expires by its TTL.
///
/// List requests are answered from a copy read at most every
/// [`RedisConfig::list_cache`](crate::RedisConfig::list_cache); when Redis
/// cannot be read and the copy is older than that, they fail with the
/// reason.
pub struct RedisRegistry {
    store: RedisStore,
    heartbeat: Script,
    upsert: Script,
    expire: Script,
    /// The last listing read, when, and its size.
    listing: Option<(Instant, Vec<Listed>)>,
    listed: usize,
    /// Word that Redis lost its data (`RedisStore::restarts`): the servers
    /// remembered are written back.
    restarts: tokio::sync::watch::Receiver<u64>,
    /// The servers this master listed or read, with when, within the
    /// expiry: what it writes back when Redis loses them.
    remembered: std::collections::HashMap<SocketAddr, (ServerInfo, Instant)>,
}

impl std::fmt::Debug for RedisRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRegistry")
            .field("store", &self.store)
            .field("listed", &self.listed)
            .finish_non_exhaustive()
    }
}

impl RedisRegistry {
    /// A registry in `store`.
    pub fn new(store: RedisStore) -> Self {
        Self {
            heartbeat: Script::new(&format!("{PRELUDE}{HEARTBEAT}")),
            upsert: Script::new(&format!("{PRELUDE}{UPSERT}")),
            expire: Script::new(EXPIRE),
            restarts: store.restarts(),
            store,
            listing: None,
            listed: 0,
            remembered: Default::default(),
        }
    }

    fn servers_key(&self) -> String {
        self.store.key("master:servers")
    }

    /// The three keys a heartbeat or upsert touches.
    fn keys(&self, addr: SocketAddr) -> [String; 3] {
        [
            self.servers_key(),
            self.store.key(format_args!("master:info:{addr}")),
            self.store.key(format_args!("master:ip:{}", addr.ip())),
        ]
    }

    async fn decide(
        &self,
        script: &Script,
        addr: SocketAddr,
        limits: Limits,
        info: Option<String>,
    ) -> Result<String, RegistryError> {
        let mut invocation = script.prepare_invoke();
        for key in self.keys(addr) {
            invocation.key(key);
        }
        invocation
            .arg(addr.to_string())
            .arg(expiry_ms(limits.expiry))
            .arg(limits.max_servers)
            .arg(limits.max_servers_per_address)
            .arg(limits.grace.as_millis() as u64);
        if let Some(info) = info {
            invocation.arg(info);
        }
        self.store
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await
            .map_err(unavailable)
    }

    /// After Redis came back or lost its data: the servers this master
    /// listed or read within the expiry are written again at once (each
    /// with a fresh expiry: one that died meanwhile expires again), instead
    /// of waiting for their next heartbeats. Said once in the log.
    async fn restore(&mut self, expiry: Duration) {
        let now = Instant::now();
        self.remembered
            .retain(|_, (_, at)| now.saturating_duration_since(*at) <= expiry);
        if !self.restarts.has_changed().unwrap_or(false) {
            return;
        }
        self.restarts.mark_unchanged();
        let limits = Limits {
            max_servers: usize::MAX,
            max_servers_per_address: usize::MAX,
            expiry,
            grace: Duration::ZERO,
        };
        let servers: Vec<(SocketAddr, ServerInfo)> = self
            .remembered
            .iter()
            .map(|(addr, (info, _))| (*addr, info.clone()))
            .collect();
        let mut written = 0;
        for (addr, info) in servers {
            let Ok(json) = serde_json::to_string(&info) else {
                continue;
            };
            if self
                .decide(&self.upsert, addr, limits, Some(json))
                .await
                .is_ok()
            {
                written += 1;
            }
        }
        self.listing = None;
        tracing::info!(written, "server list written again after Redis came back");
    }

    /// Remembers what `listed` says, as of now.
    fn remember(&mut self, listed: &[Listed]) {
        let now = Instant::now();
        for l in listed {
            self.remembered.insert(l.addr, (l.info.clone(), now));
        }
    }

    /// Every listed server, sorted by address, read again once the last reading is older
    /// than `list_cache`.
    async fn listing(&mut self) -> Result<&[Listed], RegistryError> {
        let fresh = self
            .listing
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < self.store.config().list_cache);
        if !fresh {
            let all = self.read_all().await.map_err(unavailable)?;
            self.remember(&all);
            self.listed = all.len();
            self.listing = Some((Instant::now(), all));
        }
        Ok(self
            .listing
            .as_ref()
            .map(|(_, all)| all.as_slice())
            .unwrap_or_default())
    }

    /// Every listed server, sorted by address, read from Redis.
    async fn read_all(&self) -> Result<Vec<Listed>, StoreError> {
        let key = self.servers_key();
        let addrs: Vec<String> = self
            .store
            .run(|mut c| async move {
                redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        let mut listed = Vec::with_capacity(addrs.len());
        for chunk in addrs.chunks(READ_CHUNK) {
            let keys: Vec<String> = chunk
                .iter()
                .map(|addr| self.store.key(format_args!("master:info:{addr}")))
                .collect();
            let infos: Vec<Option<String>> = self
                .store
                .run(|mut c| async move { redis::cmd("MGET").arg(&keys).query_async(&mut c).await })
                .await?;
            for (addr, info) in chunk.iter().zip(infos) {
                // Expired between the two reads: no longer listed.
                let Some(info) = info else { continue };
                let addr: SocketAddr = addr
                    .parse()
                    .map_err(|_| StoreError::Corrupt(format!("address {addr:?}")))?;
                let info: ServerInfo = serde_json::from_str(&info)
                    .map_err(|err| StoreError::Corrupt(format!("info of {addr}: {err}")))?;
                listed.push(Listed { addr, info });
            }
        }
        listed.sort_by_key(|l| l.addr);
        Ok(listed)
    }
}

fn expiry_ms(expiry: Duration) -> u64 {
    expiry.as_millis().max(1) as u64
}

fn unavailable(err: StoreError) -> RegistryError {
    RegistryError(err.to_string())
}

fn unexpected(reply: &str) -> RegistryError {
    RegistryError(format!(
        "unexpected reply from the registry script: {reply:?}"
    ))
}

impl Registry for RedisRegistry {
    async fn heartbeat(
        &mut self,
        addr: SocketAddr,
        _now: Instant,
        limits: Limits,
    ) -> Result<Heard, RegistryError> {
        let reply = self.decide(&self.heartbeat, addr, limits, None).await?;
        match reply.as_str() {
            "listed" => Ok(Heard::Listed),
            "new" => Ok(Heard::New),
            "full" => Ok(Heard::Full),
            "ip_full" => Ok(Heard::IpFull),
            other => Err(unexpected(other)),
        }
    }

    async fn upsert(
        &mut self,
        addr: SocketAddr,
        info: ServerInfo,
        _now: Instant,
        limits: Limits,
    ) -> Result<Upserted, RegistryError> {
        let json = serde_json::to_string(&info)
            .map_err(|err| RegistryError(format!("server info does not encode: {err}")))?;
        let reply = self.decide(&self.upsert, addr, limits, Some(json)).await?;
        if reply == "added" || reply == "refreshed" {
            self.remembered.insert(addr, (info, Instant::now()));
        }
        let upserted = match reply.as_str() {
            "added" => Upserted::Added,
            "refreshed" => Upserted::Refreshed,
            "full" => Upserted::Full,
            "ip_full" => Upserted::IpFull,
            other => return Err(unexpected(other)),
        };
        if upserted == Upserted::Added {
            // The next list request reads the new server.
            self.listing = None;
        }
        Ok(upserted)
    }

    async fn remove(&mut self, addr: SocketAddr) -> Result<bool, RegistryError> {
        let [servers, info, ip] = self.keys(addr);
        let member = addr.to_string();
        let removed: (u32, u32, u32) = self
            .store
            .run(|mut c| async move {
                redis::pipe()
                    .atomic()
                    .cmd("ZREM")
                    .arg(&servers)
                    .arg(&member)
                    .cmd("DEL")
                    .arg(&info)
                    .cmd("ZREM")
                    .arg(&ip)
                    .arg(&member)
                    .query_async(&mut c)
                    .await
            })
            .await
            .map_err(unavailable)?;
        // The next list request reads the list without it.
        self.listing = None;
        self.remembered.remove(&addr);
        Ok(removed.1 == 1)
    }

    async fn expire(&mut self, _now: Instant, expiry: Duration) -> Result<usize, RegistryError> {
        self.restore(expiry).await;
        let key = self.servers_key();
        let script = &self.expire;
        let (expired, listed): (usize, usize) = self
            .store
            .run(|mut c| async move {
                script
                    .key(key)
                    .arg(expiry_ms(expiry))
                    .invoke_async(&mut c)
                    .await
            })
            .await
            .map_err(unavailable)?;
        self.listed = listed;
        Ok(expired)
    }

    async fn query(&mut self, request: &ListRequest) -> Result<ListPage, RegistryError> {
        let all = self.listing().await?;
        Ok(page_of(all.iter().map(|l| (&l.addr, &l.info)), request))
    }

    async fn matching(
        &mut self,
        filter: &Filter,
        max: usize,
    ) -> Result<Vec<Listed>, RegistryError> {
        let all = self.listing().await?;
        Ok(all
            .iter()
            .filter(|l| filter.matches(&l.info))
            .take(max)
            .cloned()
            .collect())
    }

    fn len(&self) -> usize {
        self.listed
    }
}
