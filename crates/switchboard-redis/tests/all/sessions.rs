//! Sessions in a real Redis, as several processes see them: a claim takes a
//! session over once (its token rotates in the same step), the process that
//! lost it learns so, an offline session lives for its grace period, tokens
//! are never stored in the clear, and a Redis outage is an error, not a
//! wrong answer.

use std::net::IpAddr;
use std::time::Duration;

use switchboard::manager::{SessionShare, ShareUpdate, SharedSession};
use switchboard::session::ReconnectToken;
use switchboard::ClientId;
use switchboard_redis::testing::RedisProcess;
use switchboard_redis::RedisSessions;

const GRACE: Duration = Duration::from_secs(30);

/// One server process's view of the shared sessions.
fn process(redis: &RedisProcess) -> RedisSessions {
    RedisSessions::new(redis.store())
}

fn session(n: u128) -> SharedSession {
    SharedSession {
        client: ClientId::from_u128(n),
        name: format!("player {n}"),
        from: IpAddr::from([10, 0, 0, 1]),
        reconnects: 0,
    }
}

fn token(byte: u8) -> ReconnectToken {
    ReconnectToken([byte; 32])
}

async fn online(process: &RedisSessions, session: &SharedSession, token: &ReconnectToken) {
    let update = ShareUpdate::Online {
        session: session.clone(),
        token: token.clone(),
    };
    let moved = process.apply(vec![update], GRACE).await.unwrap();
    assert!(moved.is_empty(), "{moved:?}");
}

#[tokio::test]
async fn a_session_is_claimed_once_and_its_token_rotates_in_the_same_step() {
    let redis = RedisProcess::start().unwrap();
    let (a, b, c) = (process(&redis), process(&redis), process(&redis));
    let ada = session(1);
    online(&a, &ada, &token(1)).await;

    // A wrong token finds nothing.
    assert_eq!(
        a.claim(ada.client, &token(9), &token(2), GRACE).await,
        Ok(None)
    );
    let claimed = b
        .claim(ada.client, &token(1), &token(2), GRACE)
        .await
        .unwrap();
    let claimed = claimed.expect("the current token takes it over");
    assert_eq!(
        (claimed.client, claimed.name.as_str()),
        (ada.client, "player 1")
    );
    assert_eq!((claimed.from, claimed.reconnects), (ada.from, 1));
    // The old token is spent: a second process racing with it gets nothing.
    assert_eq!(
        c.claim(ada.client, &token(1), &token(3), GRACE).await,
        Ok(None)
    );
    // Only the new one works.
    assert!(c
        .claim(ada.client, &token(2), &token(3), GRACE)
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn the_process_that_lost_a_session_learns_it_and_writes_nothing_over_it() {
    let redis = RedisProcess::start().unwrap();
    let (a, b) = (process(&redis), process(&redis));
    let ada = session(1);
    online(&a, &ada, &token(1)).await;
    b.claim(ada.client, &token(1), &token(2), GRACE)
        .await
        .unwrap()
        .unwrap();
    // A renews its online sessions: this one is B's now.
    let renewal = ShareUpdate::Online {
        session: ada.clone(),
        token: token(1),
    };
    let gone = ShareUpdate::Gone { client: ada.client };
    assert_eq!(
        a.apply(vec![renewal, gone], GRACE).await.unwrap(),
        [ada.client]
    );
    // Neither A's renewal nor its "gone" touched B's session.
    assert!(b
        .claim(ada.client, &token(2), &token(3), GRACE)
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn an_offline_session_lives_for_its_grace_period_and_no_longer() {
    let redis = RedisProcess::start().unwrap();
    let (a, b) = (process(&redis), process(&redis));
    let grace = Duration::from_millis(300);
    let (ada, bob) = (session(1), session(2));
    for (s, t) in [(&ada, token(1)), (&bob, token(2))] {
        let update = ShareUpdate::Online {
            session: s.clone(),
            token: t,
        };
        a.apply(vec![update], grace).await.unwrap();
    }
    let offline = vec![
        ShareUpdate::Offline { client: ada.client },
        ShareUpdate::Offline { client: bob.client },
    ];
    a.apply(offline, grace).await.unwrap();
    // Within the grace period: Ada comes back elsewhere.
    assert!(b
        .claim(ada.client, &token(1), &token(3), grace)
        .await
        .unwrap()
        .is_some());
    tokio::time::sleep(grace + Duration::from_millis(150)).await;
    // Past it: Bob's session is gone.
    assert_eq!(
        b.claim(bob.client, &token(2), &token(4), grace).await,
        Ok(None)
    );
}

#[tokio::test]
async fn redis_holds_no_token_a_client_could_present() {
    let redis = RedisProcess::start().unwrap();
    let a = process(&redis);
    let ada = session(1);
    let secret = ReconnectToken([0xAB; 32]);
    online(&a, &ada, &secret).await;
    let key = redis.store().key(format_args!("session:{}", ada.client));
    let fields: Vec<String> = redis
        .store()
        .run(|mut c| async move { redis::cmd("HVALS").arg(&key).query_async(&mut c).await })
        .await
        .unwrap();
    assert!(!fields.is_empty());
    let hex: String = secret.0.iter().map(|b| format!("{b:02x}")).collect();
    assert!(
        fields
            .iter()
            .all(|f| !f.contains(&hex) && !f.contains("\u{AB}")),
        "{fields:?}"
    );
}

#[tokio::test]
async fn redis_down_is_an_error_and_a_restarted_redis_gets_the_online_sessions_back() {
    let mut redis = RedisProcess::start().unwrap();
    let (a, b) = (process(&redis), process(&redis));
    let ada = session(1);
    online(&a, &ada, &token(1)).await;
    redis.stop();
    let err = b
        .claim(ada.client, &token(1), &token(2), GRACE)
        .await
        .unwrap_err();
    assert!(err.0.contains("redis unavailable"), "{err}");
    redis.restart().unwrap();
    // Redis came back empty; A's next renewal writes Ada again.
    let mut renewed = false;
    for _ in 0..50 {
        let update = ShareUpdate::Online {
            session: ada.clone(),
            token: token(1),
        };
        if a.apply(vec![update], GRACE).await.is_ok() {
            renewed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(renewed, "the store reconnected");
    assert!(b
        .claim(ada.client, &token(1), &token(2), GRACE)
        .await
        .unwrap()
        .is_some());
}
