//! The `compact_frames` fuzz target; its body is `bodies/compact_frames.rs`, which the corpus
//! replay test runs too.
#![no_main]

#[path = "../bodies/compact_frames.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
