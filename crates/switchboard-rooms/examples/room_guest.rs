//! A native Rust player for other clients' tests (the Python client's): it
//! joins room ROOM on the rooms server at ADDR, greets everyone there with
//! an RPC, and prints each RPC it gets as a line `rpc FROM METHOD TEXT`,
//! until its stdin closes.
//!
//! ```text
//! cargo run -p switchboard-rooms --example room_guest -- 127.0.0.1:7100 1 rusty
//! ```

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use switchboard::codec::decode_value;
use switchboard::{ClientConfig, RequestStatus};
use switchboard_rooms::{RoomClient, RoomClientEvent, RoomEvent, RpcTarget};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, room, name] = args.as_slice() else {
        return Err("usage: room_guest ADDR ROOM NAME".into());
    };
    let room: u32 = room.parse()?;
    let mut guest = RoomClient::connect(addr, ClientConfig::named(name));
    let ticket = guest.join(switchboard_rooms::RoomId(room))?;
    match guest.wait(ticket, Duration::from_secs(10)) {
        RequestStatus::Accepted => println!("joined {room}"),
        other => return Err(format!("could not join room {room}: {other:?}").into()),
    }
    let ticket = guest.call(RpcTarget::All, "greet", &format!("hello from {name}"))?;
    if guest.wait(ticket, Duration::from_secs(10)) != RequestStatus::Accepted {
        return Err("the greeting was not accepted".into());
    }
    // Stops when whoever started it closes its stdin.
    let done = Arc::new(AtomicBool::new(false));
    let stop = done.clone();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        stop.store(true, Ordering::Relaxed);
    });
    let mut out = std::io::stdout();
    while !done.load(Ordering::Relaxed) && !guest.client().is_finished() {
        for event in guest.drain_timeout(Duration::from_millis(20)) {
            if let RoomClientEvent::Room(RoomEvent::Rpc(call)) = event {
                let text: String = decode_value(&call.args).unwrap_or_default();
                writeln!(out, "rpc {} {} {text}", call.from, call.method)?;
                out.flush()?;
            }
        }
    }
    guest.close("done");
    Ok(())
}
