//! The rooms crate's integration tests, in one test binary: one build and one link
//! for all of them, and the tests of every file share the test threads.
//! Each module is one concern, as each file was (`cargo test -p switchboard-rooms
//! --test all rooms::` runs one).

#[path = "../../../../tests/common/mod.rs"]
mod common;

mod fuzz_corpora;
mod record;
mod rooms;
mod rooms_loopback;
