//! The `rooms_requests` fuzz target; its body is `bodies/rooms_requests.rs`, which the corpus
//! replay test runs too.
#![no_main]

#[path = "../bodies/rooms_requests.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
