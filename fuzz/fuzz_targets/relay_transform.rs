//! The `relay_transform` fuzz target; its body is `bodies/relay_transform.rs`, which the corpus
//! replay test runs too.
#![no_main]

#[path = "../bodies/relay_transform.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
