//! The `frame_decoder` fuzz target; its body is `bodies/frame_decoder.rs`, which the corpus
//! replay test runs too.
#![no_main]

#[path = "../bodies/frame_decoder.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
