//! The root crate's integration tests, in one test binary: one build and
//! one link for all of them, and the tests of every file share the test
//! threads. Each module is one concern, as each file was (`cargo test
//! --test all tls::` runs one). `tests/fds.rs` stays a binary of its own:
//! it counts the process's open descriptors, so nothing else may run
//! beside it.

#[path = "../common/mod.rs"]
mod common;
#[path = "../conformance/mod.rs"]
mod conformance;

mod admission;
mod attacks;
mod channels;
mod client;
mod codec;
mod connect_tokens;
mod fairness;
mod fuzz_corpora;
mod harness;
mod hostile_server;
mod lifecycle;
mod pacing;
mod quic;
mod quic_sessions;
mod shared_sessions;
mod socket;
mod std_loop_client;
mod tls;
mod wakeups;
mod websocket;
mod webtransport;
