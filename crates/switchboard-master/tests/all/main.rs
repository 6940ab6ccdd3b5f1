//! The master crate's integration tests, in one test binary: one build and one link
//! for all of them, and the tests of every file share the test threads.
//! Each module is one concern, as each file was (`cargo test -p switchboard-master
//! --test all limits::` runs one).

mod browser_example;
mod fuzz_master_datagram;
mod limits;
mod outage;
