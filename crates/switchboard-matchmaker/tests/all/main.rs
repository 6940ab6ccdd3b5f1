//! The matchmaker's integration tests, in one test binary, against a real
//! `redis-server` (`switchboard_redis::testing::RedisProcess`) and real
//! rooms processes (`cargo test -p switchboard-matchmaker --test all
//! directory::` runs one module).

mod directory;
