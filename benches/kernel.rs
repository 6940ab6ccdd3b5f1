//! The machine's floor for a relay: what one small loopback TCP write costs
//! the writer's thread, back to back and spaced out, and how many of the
//! writes had to wake the reader, asleep on another core as a game client
//! or a bot is between messages. `cargo bench --bench kernel`.
//!
//! No Switchboard code runs here: these are the kernel's prices, which set
//! what a relay's deliveries cost on this machine. The relay's figures in
//! `docs/PERFORMANCE.md` are read against them: a machine whose write
//! costs five times more holds a fifth of the writes a second.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A relayed transform's size on the wire, frame header included.
const FRAME: usize = 74;
const WRITES: u32 = 20_000;

fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let writer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    writer.set_nodelay(true).unwrap();
    let (reader, _) = listener.accept().unwrap();
    (writer, reader)
}

/// Microseconds per write of `FRAME` bytes, `gap` apart, while another
/// thread reads (blocking: asleep whenever the socket is empty); and how
/// many reads it made, each after a wake-up.
fn timed_writes(gap: Duration) -> (f64, u32) {
    let (mut writer, mut reader) = pair();
    // Reads until the writer is dropped (end of stream).
    let reading = std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut wakes = 0;
        while let Ok(1..) = reader.read(&mut buf) {
            wakes += 1;
        }
        wakes
    });
    let frame = [7u8; FRAME];
    let mut writing = Duration::ZERO;
    for _ in 0..WRITES {
        let began = Instant::now();
        writer.write_all(&frame).unwrap();
        writing += began.elapsed();
        if !gap.is_zero() {
            let until = Instant::now() + gap;
            // Spin rather than sleep: the writer's own core stays awake, as
            // a busy relay's does; only the reader sleeps.
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    }
    drop(writer);
    let wakes = reading.join().unwrap();
    (writing.as_secs_f64() * 1e6 / f64::from(WRITES), wakes)
}

fn main() {
    // A system call that does next to nothing (getpid), for scale.
    let began = Instant::now();
    for _ in 0..WRITES {
        std::hint::black_box(std::process::id());
    }
    let syscall = began.elapsed().as_secs_f64() * 1e6 / f64::from(WRITES);
    println!("a system call that does nothing (getpid): {syscall:.2} us");
    println!("{FRAME}-byte loopback TCP writes (TCP_NODELAY), {WRITES} per case, median of 3:");
    println!(
        "{:<14} {:>12} {:>30}",
        "case", "us per write", "writes that woke the reader"
    );
    for (name, gap) in [
        ("back to back", Duration::ZERO),
        ("50 us apart", Duration::from_micros(50)),
        ("200 us apart", Duration::from_micros(200)),
    ] {
        let mut runs: Vec<(f64, u32)> = (0..3).map(|_| timed_writes(gap)).collect();
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (us, wakes) = runs[1];
        let share = f64::from(wakes) * 100.0 / f64::from(WRITES);
        println!("{name:<14} {us:>12.2} {share:>29.0}%");
    }
}
