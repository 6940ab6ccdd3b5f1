//! The `session` fuzz target; its body is `bodies/session.rs`, which the corpus
//! replay test runs too.
#![no_main]

#[path = "../bodies/session.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
