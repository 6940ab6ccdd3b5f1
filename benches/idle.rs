//! Memory of idle connections: N clients complete the handshake and stay
//! silent; the process's resident memory grows by about N times the server's
//! cost per connection (the raw clients themselves hold little: a socket and
//! its registration with the I/O driver). `cargo bench --bench idle`
//! (`BENCH_IDLE`, default 5000; each connection takes two file descriptors
//! in this one process).
//!
//! It also says where the memory goes: the live heap by allocation size,
//! counted by a counting allocator while the clients connect.
//! `TRACE_SIZE=N` prints where a few allocations of N bytes come from (build
//! with `CARGO_PROFILE_BENCH_DEBUG=line-tables-only` for the names).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use switchboard::{BindScope, EndpointConfig, EndpointEvent, EndpointStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Live allocations by size (the last slot counts everything larger).
const SLOTS: usize = 8192;
static LIVE: [AtomicI64; SLOTS] = [const { AtomicI64::new(0) }; SLOTS];
static COUNTING: AtomicBool = AtomicBool::new(false);
static TRACE_SIZE: AtomicUsize = AtomicUsize::new(0);
static TRACED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Set while a backtrace is taken (it allocates).
    static TRACING: Cell<bool> = const { Cell::new(false) };
}

struct Counting;

impl Counting {
    fn count(size: usize, delta: i64) {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE[size.min(SLOTS - 1)].fetch_add(delta, Ordering::Relaxed);
        }
    }

    fn trace(size: usize) {
        if !COUNTING.load(Ordering::Relaxed) || TRACE_SIZE.load(Ordering::Relaxed) != size {
            return;
        }
        TRACING.with(|tracing| {
            if tracing.replace(true) {
                return;
            }
            let n = TRACED.fetch_add(1, Ordering::Relaxed);
            if n % 997 == 3 && n < 5000 {
                eprintln!(
                    "=== {size} bytes\n{}",
                    std::backtrace::Backtrace::force_capture()
                );
            }
            tracing.set(false);
        });
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::count(layout.size(), 1);
        Self::trace(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Self::count(layout.size(), -1);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::count(layout.size(), -1);
        Self::count(new_size, 1);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Prints the live heap counted by size: the sizes allocated about once
/// per connection or more (and big totals), then the sum.
fn print_heap(n: usize) {
    let mut total = 0;
    println!("live heap by allocation size:");
    for (size, live) in LIVE.iter().enumerate() {
        let live = live.load(Ordering::Relaxed);
        let bytes = live * size as i64;
        total += bytes;
        if live.unsigned_abs() as usize >= n / 2 || bytes.abs() > 50_000 {
            println!(
                "{size:>6} B x {live:>6} = {bytes:>9} B ({:.0} per connection)",
                bytes as f64 / n as f64
            );
        }
    }
    println!(
        "in all {total} B: {:.0} bytes per connection, its client side included",
        total as f64 / n as f64
    );
}

fn main() {
    let n: usize = std::env::var("BENCH_IDLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let trace = std::env::var("TRACE_SIZE")
        .ok()
        .and_then(|v| v.parse().ok());
    TRACE_SIZE.store(trace.unwrap_or(0), Ordering::SeqCst);
    // Every slot written once, so that counting touches no new page later.
    for slot in &LIVE {
        slot.store(0, Ordering::Relaxed);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = EndpointConfig {
            max_connections: n + 10,
            max_pending_handshakes: n + 10,
            // Every client comes from this one address.
            max_pending_handshakes_per_address: n + 10,
            max_connections_per_address: n + 10,
            ..EndpointConfig::default()
        };
        let mut server = EndpointStream::bind(BindScope::Loopback, 0, config).unwrap();
        let addr = server.local_addr();
        let before = rss_kib();
        let mut hello = vec![0, 0, 0, 7, 0, b'S', b'W', b'B', b'D'];
        hello.extend_from_slice(&switchboard::PROTOCOL_VERSION.to_be_bytes());
        let mut clients = Vec::with_capacity(n);
        COUNTING.store(true, Ordering::SeqCst);
        for _ in 0..n {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream.write_all(&hello).await.unwrap();
            let mut theirs = [0u8; 11];
            stream.read_exact(&mut theirs).await.unwrap();
            clients.push(stream);
        }
        let mut connected = 0;
        while connected < n {
            if let Some(EndpointEvent::PeerConnected { .. }) = server.next_event().await {
                connected += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        COUNTING.store(false, Ordering::SeqCst);
        let after = rss_kib();
        let per = (after.saturating_sub(before)) as f64 * 1024.0 / n as f64;
        println!(
            "{n} idle connections: RSS {before} KiB -> {after} KiB, {:.0} bytes per connection",
            per
        );
        print_heap(n);
        drop(clients);
    });
}
