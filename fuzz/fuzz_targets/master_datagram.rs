//! The `master_datagram` fuzz target; its body is `bodies/master_datagram.rs`, which the corpus
//! replay test runs too.
#![no_main]

#[path = "../bodies/master_datagram.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
