//! The `tls_listener` fuzz target; its body is `bodies/tls_listener.rs`, which the corpus
//! replay test runs too.
#![no_main]

#[path = "../bodies/tls_listener.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
