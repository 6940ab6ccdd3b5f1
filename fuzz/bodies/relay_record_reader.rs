//! Arbitrary bytes as a relay recording: read and replayed on a fresh relay
//! core. Whatever they hold, the answer is a result, never a panic, and no
//! record is held past the record limit. Shared by the fuzz target and the
//! corpus replay test.

pub fn run(data: &[u8]) {
    let _ = switchboard_relay::record::replay(data);
}
