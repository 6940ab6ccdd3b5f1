//! Arbitrary bytes as a strategy scenario file: decoded and checked, then
//! drawn. Any panic, or an allocation past the limits, is a bug. Shared by
//! the fuzz target and the corpus replay test.

use strategy::scenario::ServerScenario;

pub fn run(data: &[u8]) {
    if let Ok(scenario) = ServerScenario::from_file_bytes(data) {
        let _ = scenario.render();
    }
}
