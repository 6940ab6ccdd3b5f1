//! The relay crate's integration tests, in one test binary: one build and
//! one link for all of them, and the tests of every file share the test
//! threads. Each module is one concern, as each file was (`cargo test -p
//! switchboard-relay --test all bots::` runs one).

#[path = "../../../../tests/common/mod.rs"]
mod common;
#[path = "../../../../fuzz/corpus.rs"]
mod corpus;
#[path = "../support/mod.rs"]
mod support;
#[path = "../webdriver/mod.rs"]
mod webdriver;

mod admin;
mod bots;
mod browser;
mod compact_vectors;
mod fuzz_corpora;
mod json;
mod quic;
mod record;
mod relay;
