//! The server crate's tests, in one test binary: one build and one link
//! for all of them (eighteen before), and the tests of every file share the
//! test threads, so a file's slow test no longer runs alone. Each module is
//! one concern, as each file was (`cargo test -p switchboard-server --test
//! all netem::` runs one).

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;
#[path = "../../../crates/switchboard-relay/tests/webdriver/mod.rs"]
mod webdriver;

mod admin;
mod admin_redis;
mod agones;
mod cli;
mod descriptors;
mod hosting;
mod manager;
mod manager_loopback;
mod master;
mod metrics;
mod netem;
mod netsim;
mod own_exe;
mod processes;
mod record;
mod scale_out;
mod torque;
mod vectors;
mod web_demo;
