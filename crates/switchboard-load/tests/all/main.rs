//! The load tester's integration tests, in one test binary, against real
//! relays on loopback (`cargo test -p switchboard-load --test all load::`
//! runs one module).

mod load;
