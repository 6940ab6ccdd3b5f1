//! The strategy game's integration tests, in one test binary: one build and one link
//! for all of them, and the tests of every file share the test threads.
//! Each module is one concern, as each file was (`cargo test -p switchboard-strategy
//! --test all e2e::` runs one).

#[path = "../../../../tests/common/mod.rs"]
mod common;
#[path = "../player/mod.rs"]
mod player;
#[path = "../process/mod.rs"]
mod process;
#[path = "../proxy/mod.rs"]
mod proxy;
#[path = "../scratch/mod.rs"]
mod scratch;

mod e2e;
mod failover;
#[cfg(feature = "agones")]
mod fleet;
mod fuzz_scenario_file;
mod hosting;
mod record;
mod screen;
