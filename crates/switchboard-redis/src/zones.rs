//! The relays' zone directory in Redis: which relay process each zone lives
//! on, and each relay's presence (`service`, kind `relay`).
//!
//! `P:relay:zone:{zone}` holds the owner's process number, with a TTL of
//! [`ZONE_TTL`] renewed at every lookup while the owner lives. A zone with
//! no live owner goes to the live relay that ranks first for it by
//! rendezvous hashing (SHA-1 of the zone and the process number, inside the
//! script): zones spread evenly, and a zone whose relay died moves to the
//! same survivor from every relay that asks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use switchboard_relay::{ZoneDirectory, ZoneFuture, ZoneOwner, ZoneRouting, ID_BITS};

use crate::service::{to_hex, Kind, Outage, Reach, Serving, REFRESH_EVERY};
use crate::store::{RedisStore, StoreError};

/// The relays of the service.
const RELAY: Kind = Kind("relay");

/// How long a zone stays assigned when no relay asks for it.
pub const ZONE_TTL: Duration = Duration::from_secs(30);

/// KEYS[1]: the zone's key, KEYS[2]: the relays' sorted set. ARGV[1]: the
/// prefix of presence keys, ARGV[2]: the zone's TTL (ms), ARGV[3]: the
/// zone's name. {process, addr, WebSocket addr or '', QUIC addr or '',
/// WebTransport hashes (comma-separated, '' for a certificate browsers
/// trust) or '-' for no WebTransport} or nil when no relay lives.
const OWNER: &str = r#"
local function reach(p)
  local r = redis.call('HMGET', ARGV[1] .. p, 'addr', 'ws', 'quic', 'wt')
  return r[1], {r[2] or '', r[3] or '', r[4] or '-'}
end
local owner = redis.call('GET', KEYS[1])
if owner then
  local addr, more = reach(owner)
  if addr then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {owner, addr, more[1], more[2], more[3]}
  end
end
local best, best_rank, best_addr, best_more = nil, nil, nil, nil
for _, p in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local addr, more = reach(p)
  if addr then
    local rank = redis.sha1hex(ARGV[3] .. '\0' .. p)
    if not best_rank or rank > best_rank then
      best, best_rank, best_addr, best_more = p, rank, addr, more
    end
  else
    redis.call('ZREM', KEYS[2], p)
  end
end
if not best then return false end
redis.call('SET', KEYS[1], best, 'PX', ARGV[2])
return {best, best_addr, best_more[1], best_more[2], best_more[3]}
"#;

/// A relay process's view of the zone directory.
pub struct RedisZones {
    store: RedisStore,
    players: AtomicUsize,
    owner: Script,
}

impl std::fmt::Debug for RedisZones {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisZones").finish_non_exhaustive()
    }
}

impl RedisZones {
    /// Takes a process number and the service's key from Redis and starts
    /// publishing this relay's presence once [`Serving::at`] says where it
    /// listens. Give the routing to `RelayConfig::zones`. Fails if Redis
    /// cannot be reached.
    pub async fn join(store: RedisStore) -> Result<(ZoneRouting, Serving), StoreError> {
        let key = RELAY.make_signing_key(&store).await?;
        let process = RELAY.next_process(&store, 32 - ID_BITS).await?;
        let zones = Arc::new(RedisZones {
            store: store.clone(),
            players: AtomicUsize::new(0),
            owner: Script::new(OWNER),
        });
        let (serving, reach) = tokio::sync::oneshot::channel();
        let publisher = zones.clone();
        tokio::spawn(async move {
            let Ok(reach) = reach.await else { return };
            publisher.publish(process, reach, to_hex(&key)).await;
        });
        Ok((ZoneRouting::new(zones, process, key), Serving(serving)))
    }

    /// Refreshes this relay's presence until the relay is gone.
    async fn publish(self: Arc<Self>, process: u32, reach: Reach, key: String) {
        let mut refresh = tokio::time::interval(REFRESH_EVERY);
        let mut outage = Outage::new("relay presence");
        // The relay holds the other reference; when it is dropped, stop.
        while Arc::strong_count(&self) > 1 {
            refresh.tick().await;
            let mut pipe = redis::pipe();
            let players = self.players.load(Ordering::Relaxed);
            RELAY.present(&mut pipe, &self.store, process, &reach, players, &key);
            let written = self
                .store
                .run(|mut c| async move { pipe.query_async::<()>(&mut c).await })
                .await;
            outage.record(written);
        }
        RELAY.withdraw(&self.store, process).await;
    }
}

impl ZoneDirectory for RedisZones {
    fn owner<'a>(&'a self, zone: &'a str) -> ZoneFuture<'a, ZoneOwner> {
        Box::pin(async move {
            let mut invocation = self.owner.prepare_invoke();
            invocation
                .key(RELAY.key(&self.store, format_args!("zone:{zone}")))
                .key(RELAY.key(&self.store, "processes"))
                .arg(RELAY.key(&self.store, "process:"))
                .arg(ZONE_TTL.as_millis() as u64)
                .arg(zone);
            let owner: Option<(u32, String, String, String, String)> = self
                .store
                .run(|mut c| async move { invocation.invoke_async(&mut c).await })
                .await
                .map_err(|err| err.to_string())?;
            let (process, addr, websocket, quic, hashes) = owner.ok_or("no relay is running")?;
            let given = |addr: String| (!addr.is_empty()).then_some(addr);
            let webtransport = (hashes != "-").then(|| {
                let hashes = hashes.split(',').filter(|h| !h.is_empty());
                hashes.map(str::to_string).collect()
            });
            Ok(ZoneOwner {
                process,
                addr,
                websocket: given(websocket),
                quic: given(quic),
                webtransport,
            })
        })
    }

    fn set_players(&self, players: usize) {
        self.players.store(players, Ordering::Relaxed);
    }
}
