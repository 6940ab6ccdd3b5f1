//! Several masters over one real Redis (a `redis-server` of the test's own):
//! a server listed through one is listed by all, limits hold across them,
//! silence expires by Redis's TTLs, and a Redis outage is a clear error that
//! heals when Redis is back.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use switchboard_master::protocol::{self, Datagram};
use switchboard_master::{
    self as master, Announce, Filter, ListRequest, Master, MasterConfig, MasterServer, ServerInfo,
};
use switchboard_redis::testing::RedisProcess;
use switchboard_redis::{RedisConfig, RedisRegistry, RedisStore};

const WAIT: Duration = Duration::from_secs(10);

fn registry(redis: &RedisProcess) -> RedisRegistry {
    RedisRegistry::new(store(redis))
}

fn store(redis: &RedisProcess) -> RedisStore {
    RedisStore::open(RedisConfig {
        url: redis.url(),
        // Every list request reads Redis: the tests look at what it holds.
        list_cache: Duration::ZERO,
        ..RedisConfig::default()
    })
    .unwrap()
}

fn info(name: &str) -> ServerInfo {
    ServerInfo {
        name: name.into(),
        max_players: 8,
        ..ServerInfo::default()
    }
}

/// Heartbeat, query, answer, through `master`; false when it sent no query.
async fn register(master: &mut Master<RedisRegistry>, from: SocketAddr, name: &str) -> bool {
    let now = Instant::now();
    let Some((_, query)) = master.on_datagram(from, &protocol::heartbeat(), now).await else {
        return false;
    };
    let Ok(Datagram::InfoQuery { challenge, .. }) = protocol::decode(&query) else {
        panic!("not a query: {query:?}");
    };
    let reply = protocol::encode(&Datagram::InfoReply {
        challenge,
        info: info(name),
    });
    master.on_datagram(from, &reply, now).await;
    true
}

async fn names(master: &mut Master<RedisRegistry>) -> Vec<String> {
    let request = ListRequest {
        filter: Filter::default(),
        page: 0,
        page_size: 100,
    };
    let page = master.list(&request).await.expect("listed");
    page.servers.into_iter().map(|l| l.info.name).collect()
}

fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], port))
}

#[tokio::test]
async fn a_server_listed_through_one_master_is_listed_by_all() {
    let redis = RedisProcess::start().unwrap();
    let mut a = Master::new(MasterConfig::default(), registry(&redis));
    let mut b = Master::new(MasterConfig::default(), registry(&redis));
    assert!(register(&mut a, addr(1, 7000), "alpha").await);
    assert!(register(&mut b, addr(2, 7000), "beta").await);
    assert_eq!(names(&mut a).await, ["alpha", "beta"]);
    assert_eq!(names(&mut b).await, ["alpha", "beta"]);
    // A heartbeat to the other master refreshes it there too: it is
    // known, so no second registration is counted.
    assert!(register(&mut b, addr(1, 7000), "alpha").await);
    assert_eq!(a.stats().registered + b.stats().registered, 2);
}

#[tokio::test]
async fn per_address_and_total_limits_hold_across_masters() {
    let redis = RedisProcess::start().unwrap();
    let config = MasterConfig {
        max_servers_per_address: 2,
        max_servers: 3,
        ..MasterConfig::default()
    };
    let mut a = Master::new(config.clone(), registry(&redis));
    let mut b = Master::new(config, registry(&redis));
    assert!(register(&mut a, addr(1, 1), "p1").await);
    assert!(register(&mut b, addr(1, 2), "p2").await);
    // A third server on the same IP, through either master: refused.
    assert!(!register(&mut a, addr(1, 3), "p3").await);
    assert!(!register(&mut b, addr(1, 4), "p4").await);
    assert_eq!(
        a.stats().refused_per_address + b.stats().refused_per_address,
        2
    );
    assert!(register(&mut b, addr(2, 1), "q").await);
    // Three listed in all: the registry is full for both.
    assert!(!register(&mut a, addr(3, 1), "r").await);
    assert_eq!(a.stats().refused_full, 1);
    assert_eq!(names(&mut b).await.len(), 3);
}

#[tokio::test]
async fn a_race_between_masters_cannot_list_past_the_limit() {
    // Both masters were told there is room (the heartbeat), then both
    // answers arrive: the upsert checks again, atomically.
    let redis = RedisProcess::start().unwrap();
    let config = MasterConfig {
        max_servers_per_address: 1,
        ..MasterConfig::default()
    };
    let mut a = Master::new(config.clone(), registry(&redis));
    let mut b = Master::new(config, registry(&redis));
    let now = Instant::now();
    let mut challenges = Vec::new();
    for (master, from) in [(&mut a, addr(5, 1)), (&mut b, addr(5, 2))] {
        let (_, query) = master
            .on_datagram(from, &protocol::heartbeat(), now)
            .await
            .expect("room for one: both are queried");
        let Ok(Datagram::InfoQuery { challenge, .. }) = protocol::decode(&query) else {
            panic!("not a query");
        };
        challenges.push((from, challenge));
    }
    for (master, (from, challenge)) in [&mut a, &mut b].into_iter().zip(challenges) {
        let reply = protocol::encode(&Datagram::InfoReply {
            challenge,
            info: info("racer"),
        });
        master.on_datagram(from, &reply, now).await;
    }
    assert_eq!(names(&mut a).await, ["racer"], "one listed, not two");
    assert_eq!(a.stats().registered + b.stats().registered, 1);
    assert_eq!(b.stats().refused_per_address, 1);
}

#[tokio::test]
async fn a_silent_server_expires_by_its_redis_ttl() {
    let redis = RedisProcess::start().unwrap();
    let config = MasterConfig {
        expiry: Duration::from_millis(300),
        ..MasterConfig::default()
    };
    let mut a = Master::new(config.clone(), registry(&redis));
    let mut b = Master::new(config, registry(&redis));
    assert!(register(&mut a, addr(1, 7000), "alpha").await);
    assert_eq!(names(&mut b).await, ["alpha"]);
    tokio::time::sleep(Duration::from_millis(450)).await;
    // No master ran its expiry: Redis dropped the info by its TTL.
    assert!(names(&mut b).await.is_empty());
    let info_key = store(&redis).key("master:info:10.0.0.1:7000");
    let left: Option<String> = store(&redis)
        .run(|mut c| async move { redis::cmd("GET").arg(&info_key).query_async(&mut c).await })
        .await
        .unwrap();
    assert_eq!(left, None);
    b.tick(Instant::now()).await;
    assert_eq!(b.stats().listed, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_fails_listings_with_a_clear_error_and_heals_when_it_is_back() {
    let mut redis = RedisProcess::start().unwrap();
    let config = MasterConfig {
        tick_interval: Duration::from_millis(100),
        ..MasterConfig::default()
    };
    let mut running = Vec::new();
    for _ in 0..2 {
        let master = MasterServer::builder()
            .config(config.clone())
            .registry(registry(&redis))
            .spawn()
            .unwrap();
        running.push(master);
    }
    let masters: Vec<SocketAddr> = running.iter().map(|m| m.local_addr()).collect();
    // A game server announcing itself to the first master only, every
    // 200 ms.
    let mut announce = Announce::new(vec![masters[0]], info("game"));
    announce.heartbeat_interval = Duration::from_millis(200);
    let _game = master::Announcer::start("127.0.0.1:0".parse().unwrap(), announce)
        .await
        .unwrap();
    let listed_by = |at: SocketAddr| async move {
        master::fetch_list(at, Filter::default(), WAIT)
            .await
            .map(|l| l.into_iter().map(|l| l.info.name).collect::<Vec<_>>())
    };
    let deadline = Instant::now() + WAIT;
    while listed_by(masters[1]).await.unwrap() != ["game"] {
        assert!(
            Instant::now() < deadline,
            "never listed by the second master"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    redis.stop();
    let started = Instant::now();
    let err = listed_by(masters[1]).await.unwrap_err().to_string();
    assert!(
        err.contains("server list unavailable") && !err.contains("redis"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(3), "failed fast");

    redis.restart().unwrap();
    // Redis came back empty: the next heartbeats list the game again.
    let deadline = Instant::now() + WAIT;
    loop {
        match listed_by(masters[1]).await {
            Ok(names) if names == ["game"] => break,
            other => {
                assert!(Instant::now() < deadline, "never healed: {other:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_fails_a_listing_within_the_timeout_and_the_master_answers_others() {
    let redis = RedisProcess::start().unwrap();
    let running = MasterServer::builder()
        .registry(registry(&redis))
        .spawn()
        .unwrap();
    let master = running.local_addr();
    assert!(master::fetch_list(master, Filter::default(), WAIT)
        .await
        .is_ok());

    redis.freeze();
    let started = Instant::now();
    let err = master::fetch_list(master, Filter::default(), WAIT)
        .await
        .unwrap_err()
        .to_string();
    let waited = started.elapsed();
    redis.thaw();
    assert!(err.contains("server list unavailable"), "{err}");
    // The response and connect timeouts (500 ms each) bound the wait.
    assert!(waited < Duration::from_millis(2500), "waited {waited:?}");
    // Its counters do not need Redis.
    assert!(
        master::master_stats(master, WAIT)
            .await
            .unwrap()
            .registry_errors
            >= 1
    );
    assert!(master::fetch_list(master, Filter::default(), WAIT)
        .await
        .is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_writes_its_list_again_at_once_after_redis_restarts_empty() {
    let mut redis = RedisProcess::start().unwrap();
    let mut master = Master::new(MasterConfig::default(), registry(&redis));
    let game: SocketAddr = "10.0.0.7:7000".parse().unwrap();
    assert!(register(&mut master, game, "game").await);
    assert_eq!(names(&mut master).await, ["game"]);
    redis.restart().unwrap();
    // No heartbeat comes (the next would be seconds away): the master's
    // ticks write what it last listed.
    let deadline = Instant::now() + WAIT;
    let restarted = Instant::now();
    loop {
        master.tick(Instant::now()).await;
        if names(&mut master).await == ["game"] {
            break;
        }
        assert!(Instant::now() < deadline, "the list never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        restarted.elapsed() < Duration::from_secs(2),
        "{:?}",
        restarted.elapsed()
    );
}
