//! The `axispy_bridge` fuzz target; its body is `bodies/axispy_bridge.rs`, which the corpus
//! replay test runs too.
#![no_main]

#[path = "../bodies/axispy_bridge.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
