//! The AxisPy crate's integration tests, in one test binary (`cargo test -p
//! switchboard-axispy --test all attacks::` runs one module).

mod attacks;
mod fuzz_corpora;
mod listener;
