//! Arbitrary datagrams into a master (heartbeats, info replies, garbage from
//! many sources) and arbitrary list requests. Any panic is a bug. Shared by
//! the fuzz target and the corpus replay test.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use switchboard_master::protocol::ListRequest;
use switchboard_master::{Master, MasterConfig, MemoryRegistry};

pub fn run(data: &[u8]) {
    let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
    let mut now = Instant::now();
    // Each record: a source byte, a length byte, then the datagram.
    let mut rest = data;
    while let [source, len, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        let (datagram, next) = tail.split_at(len);
        rest = next;
        let from = SocketAddr::from(([10, 0, 0, source % 8], 27_000 + u16::from(*source)));
        now += Duration::from_millis(u64::from(*source));
        let _ = master.on_datagram(from, datagram, now);
        if let Ok(request) = switchboard::codec::decode_value::<ListRequest>(datagram) {
            let _ = master.list(&request);
        }
        if source % 16 == 0 {
            master.tick(now);
        }
    }
    let _ = master.stats();
}
