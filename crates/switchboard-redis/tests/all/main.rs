//! The Redis crate's integration tests, in one test binary: one build and one link
//! for all of them, and the tests of every file share the test threads.
//! Each module is one concern, as each file was (`cargo test -p switchboard-redis
//! --test all zones::` runs one).

mod registry;
mod restarts;
mod sessions;
mod zones;
