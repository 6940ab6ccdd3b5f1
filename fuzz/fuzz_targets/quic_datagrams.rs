//! The `quic_datagrams` fuzz target; its body is `bodies/quic_datagrams.rs`, which the corpus
//! replay test runs too.
#![no_main]

#[path = "../bodies/quic_datagrams.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
