//! Arbitrary datagrams into a master (heartbeats, info replies, garbage from
//! many sources) and arbitrary list requests. Any panic is a bug. Shared by
//! the fuzz target and the corpus replay test.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use switchboard_master::protocol::ListRequest;
use switchboard_master::{Master, MasterConfig, MemoryRegistry};

/// The in-memory registry's futures are ready at once: one poll runs them.
fn now<F: Future>(future: F) -> F::Output {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => unreachable!("the in-memory registry never waits"),
    }
}

pub fn run(data: &[u8]) {
    let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
    let mut at = Instant::now();
    // Each record: a source byte, a length byte, then the datagram.
    let mut rest = data;
    while let [source, len, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        let (datagram, next) = tail.split_at(len);
        rest = next;
        let from = SocketAddr::from(([10, 0, 0, source % 8], 27_000 + u16::from(*source)));
        at += Duration::from_millis(u64::from(*source));
        let _ = now(master.on_datagram(from, datagram, at));
        if let Ok(request) = switchboard::codec::decode_value::<ListRequest>(datagram) {
            let _ = now(master.list(&request));
        }
        if source % 16 == 0 {
            now(master.tick(at));
        }
    }
    let _ = master.stats();
}
