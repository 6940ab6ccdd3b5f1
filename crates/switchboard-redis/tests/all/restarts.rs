//! Redis restarted empty: every process that owns state in it hears so
//! (`RedisStore::restarts`) and writes that state again at once.

use std::time::{Duration, Instant};

use switchboard_redis::testing::RedisProcess;
use switchboard_redis::GameLease;

const WAIT: Duration = Duration::from_secs(10);

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    switchboard::runtime::handle().block_on(future)
}

#[test]
fn a_redis_restarted_empty_is_noticed_by_every_store_within_a_second() {
    let mut redis = RedisProcess::start().unwrap();
    let (one, two) = (redis.store(), redis.store());
    let (mut first, mut second) = (one.restarts(), two.restarts());
    // Both have seen the marker once.
    std::thread::sleep(Duration::from_millis(600));
    let before = (*first.borrow_and_update(), *second.borrow_and_update());
    redis.restart().unwrap();
    let restarted = Instant::now();
    block_on(async {
        tokio::time::timeout(WAIT, first.changed())
            .await
            .unwrap()
            .unwrap();
        tokio::time::timeout(WAIT, second.changed())
            .await
            .unwrap()
            .unwrap();
    });
    assert!(*first.borrow() > before.0 && *second.borrow() > before.1);
    assert!(
        restarted.elapsed() < Duration::from_secs(2),
        "{:?}",
        restarted.elapsed()
    );
}

#[test]
fn a_game_lease_and_checkpoint_are_written_again_after_redis_restarts_empty() {
    let mut redis = RedisProcess::start().unwrap();
    let store = redis.store();
    let ttl = Duration::from_millis(600);
    let lease = block_on(GameLease::try_acquire(&store, "g1", ttl))
        .unwrap()
        .expect("a free game");
    block_on(lease.save_checkpoint(b"turn 3".to_vec())).unwrap();
    block_on(async { lease.keep(|| panic!("not lost")) });
    // Another server cannot take it while it is kept.
    assert!(block_on(GameLease::try_acquire(&store, "g1", ttl))
        .unwrap()
        .is_none());
    redis.restart().unwrap();
    let restarted = Instant::now();
    let checkpoints = switchboard_redis::RedisCheckpoints::new(redis.store(), "g1").unwrap();
    let deadline = Instant::now() + WAIT;
    while block_on(checkpoints.load()).ok().flatten().as_deref() != Some(&b"turn 3"[..]) {
        assert!(
            Instant::now() < deadline,
            "the checkpoint was never written again"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!(
        "checkpoint written again {:?} after Redis answered",
        restarted.elapsed()
    );
    // And the lease is this server's again: no one else gets the game.
    assert!(block_on(GameLease::try_acquire(&store, "g1", ttl))
        .unwrap()
        .is_none());
    // Released, it is free at once.
    block_on(lease.release()).unwrap();
    assert!(block_on(GameLease::try_acquire(&store, "g1", ttl))
        .unwrap()
        .is_some());
}

#[test]
fn a_game_name_redis_keys_cannot_hold_is_refused_as_a_name_not_as_corrupt_data() {
    use switchboard_redis::{RedisCheckpoints, StoreError};
    let redis = RedisProcess::start().unwrap();
    for bad in ["", "two words", "a:b", &"x".repeat(200)] {
        let refused = RedisCheckpoints::new(redis.store(), bad).unwrap_err();
        assert!(
            matches!(refused, StoreError::InvalidName(_)),
            "{bad:?}: {refused}"
        );
        let leased = block_on(GameLease::try_acquire(&redis.store(), bad, WAIT)).unwrap_err();
        assert!(
            matches!(leased, StoreError::InvalidName(_)),
            "{bad:?}: {leased}"
        );
    }
    assert!(RedisCheckpoints::new(redis.store(), "game-1_b").is_ok());
}
