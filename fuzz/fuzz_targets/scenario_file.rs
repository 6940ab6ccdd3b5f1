//! The `scenario_file` fuzz target; its body is `bodies/scenario_file.rs`, which the corpus
//! replay test runs too.
#![no_main]

#[path = "../bodies/scenario_file.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
