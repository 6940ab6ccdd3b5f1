//! The `relay_record_reader` fuzz target; its body is
//! `bodies/relay_record_reader.rs`, which the corpus replay test runs too.
#![no_main]

#[path = "../bodies/relay_record_reader.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
