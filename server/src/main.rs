//! `switchboard-server`: the dedicated Switchboard server.
//!
//! For now it only reports its version and the protocol it speaks; the
//! ServerManager issue turns it into the real server.

fn main() {
    println!(
        "switchboard-server {} (protocol {})",
        env!("CARGO_PKG_VERSION"),
        switchboard::PROTOCOL_VERSION
    );
}
