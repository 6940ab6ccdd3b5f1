//! The emulated link: two network namespaces made for it (a server side and
//! a client side), a TUN device in each, and a forwarder in this process
//! that moves every IP packet between the two through a [`Direction`] of
//! each way. Real kernel TCP and UDP run on both sides; their packets are
//! delayed, lost, duplicated, queued and cut off here.
//!
//! ```text
//!  server namespace                 this process                 client namespace
//!  10.77.0.1 ── tun ══ packets ══▶ [down: Direction] ══▶ tun ── 10.77.0.2
//!            ◀══════════════════ [up: Direction] ◀══════════
//! ```
//!
//! Nothing leaves the two namespaces: they have no other interface. The
//! namespaces (and with them the devices) are removed when the [`Link`] is
//! dropped, on a panic too; a link left by a process that was killed is
//! removed by the next one started.

use std::collections::BinaryHeap;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, RawFd};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::model::{Direction, Dropped, Fate, LinkConfig};

/// The server side's address, inside the server namespace.
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The client side's address, inside the client namespace.
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// The largest packet moved (the devices' MTU).
pub const MTU: usize = 1500;
/// Packets waiting to be delivered, each way, at most; past it a packet is
/// dropped and counted as a full queue (a flood through the link drops, as
/// a real one does).
pub const MAX_IN_FLIGHT: usize = 65_536;

/// Why a link could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetemError {
    /// Namespaces and TUN devices need root (or `CAP_NET_ADMIN`).
    #[error("the network emulator needs root or CAP_NET_ADMIN (network namespaces and TUN devices): run it with sudo")]
    NeedsRoot,
    /// `ip` (iproute2) failed or is missing.
    #[error("`ip {args}` failed: {why}")]
    Ip {
        /// The arguments.
        args: String,
        /// Its error output, or why it did not run.
        why: String,
    },
    /// A TUN device could not be opened.
    #[error("cannot open a TUN device (/dev/net/tun): {0}")]
    Tun(std::io::Error),
    /// Entering a namespace failed.
    #[error("cannot enter the namespace {0}: {1}")]
    Setns(String, std::io::Error),
}

/// What went through the link, each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// Packets read from the sending side.
    pub packets: u64,
    /// Packets written to the receiving side (duplicates counted twice).
    pub delivered: u64,
    /// Packets lost at random or in a burst.
    pub lost: u64,
    /// Packets dropped by a full queue (the bandwidth's, or
    /// [`MAX_IN_FLIGHT`]).
    pub queue_full: u64,
    /// Packets sent during an outage.
    pub outage: u64,
    /// Bytes written to the receiving side.
    pub bytes: u64,
}

#[derive(Default)]
struct Counters {
    packets: AtomicU64,
    delivered: AtomicU64,
    lost: AtomicU64,
    queue_full: AtomicU64,
    outage: AtomicU64,
    bytes: AtomicU64,
}

impl Counters {
    fn read(&self) -> DirectionStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DirectionStats {
            packets: get(&self.packets),
            delivered: get(&self.delivered),
            lost: get(&self.lost),
            queue_full: get(&self.queue_full),
            outage: get(&self.outage),
            bytes: get(&self.bytes),
        }
    }
}

/// A running emulated link; dropping it removes its namespaces.
pub struct Link {
    server_ns: String,
    client_ns: String,
    stop: Arc<AtomicBool>,
    /// Until when the link is down (microseconds since `started`; 0: up),
    /// set by [`Link::cut`].
    down_until: Arc<AtomicU64>,
    started: Instant,
    threads: Vec<JoinHandle<()>>,
    up: Arc<Counters>,
    down: Arc<Counters>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("server_ns", &self.server_ns)
            .field("client_ns", &self.client_ns)
            .finish_non_exhaustive()
    }
}

/// Runs `ip ARGS`.
fn ip(args: &[&str]) -> Result<(), NetemError> {
    let failed = |why: String| NetemError::Ip {
        args: args.join(" "),
        why,
    };
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| failed(format!("{e} (is iproute2 installed?)")))?;
    if out.status.success() {
        Ok(())
    } else {
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if why.contains("Operation not permitted") {
            return Err(NetemError::NeedsRoot);
        }
        Err(failed(why))
    }
}

/// Removes the namespaces of links whose process is gone (killed before it
/// could remove them).
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix("swnet-") else {
            continue;
        };
        let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// A TUN device named `name` in this process's namespace (no packet
/// information header: each read is one IP packet).
fn open_tun(name: &str) -> Result<tun_rs::SyncDevice, NetemError> {
    tun_rs::DeviceBuilder::new()
        .name(name)
        .mtu(MTU as u16)
        .packet_information(false)
        .build_sync()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                NetemError::NeedsRoot
            } else {
                NetemError::Tun(e)
            }
        })
}

impl Link {
    /// Makes the two namespaces and the link between them: `up` is what
    /// the link does to packets from the client to the server, `down` from
    /// the server to the client.
    pub fn start(up: LinkConfig, down: LinkConfig) -> Result<Link, NetemError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        remove_stale();
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let server_ns = format!("swnet-{pid}-{n}-s");
        let client_ns = format!("swnet-{pid}-{n}-c");
        let mut link = Link {
            server_ns,
            client_ns,
            stop: Arc::new(AtomicBool::new(false)),
            down_until: Arc::default(),
            started: Instant::now(),
            threads: Vec::new(),
            up: Arc::default(),
            down: Arc::default(),
        };
        // From here on, Drop removes whatever was made.
        let mut tuns = Vec::new();
        for (side, ns, addr) in [
            ('s', link.server_ns.clone(), SERVER_ADDR),
            ('c', link.client_ns.clone(), CLIENT_ADDR),
        ] {
            ip(&["netns", "add", &ns])?;
            let dev = format!("swt{pid}x{n}{side}");
            let tun = open_tun(&dev)?;
            ip(&["link", "set", &dev, "netns", &ns])?;
            let run = |args: &[&str]| {
                let mut all = vec!["netns", "exec", &ns, "ip"];
                all.extend_from_slice(args);
                ip(&all)
            };
            run(&["link", "set", "lo", "up"])?;
            // IPv4 only: no IPv6 chatter (router solicitations) on the link.
            let conf = format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6");
            in_namespace_thread(&ns, move || std::fs::write(conf, "1"))?
                .map_err(|e| NetemError::Setns(ns.clone(), e))?;
            run(&["addr", "add", &format!("{addr}/30"), "dev", &dev])?;
            // Room in the device's queue for a burst the forwarder has not
            // read yet (the kernel's default is 500 packets).
            run(&["link", "set", &dev, "txqueuelen", "10000"])?;
            run(&["link", "set", &dev, "up"])?;
            tuns.push(tun);
        }
        // What the kernel queued while the devices were made (their IPv6
        // chatter before it was turned off) is not the link's traffic.
        let mut buf = vec![0u8; MTU + 64];
        for tun in &tuns {
            while readable(tun.as_raw_fd(), Duration::ZERO) && tun.recv(&mut buf).is_ok() {}
        }
        let client = Arc::new(tuns.pop().expect("two devices"));
        let server = Arc::new(tuns.pop().expect("two devices"));
        let t0 = Instant::now();
        link.forward(
            client.clone(),
            server.clone(),
            Direction::new(up, t0),
            link.up.clone(),
        );
        link.forward(server, client, Direction::new(down, t0), link.down.clone());
        Ok(link)
    }

    /// Starts one direction: a thread reading `from` and deciding each
    /// packet's fate, a thread writing it to `to` when it is due.
    fn forward(
        &mut self,
        from: Arc<tun_rs::SyncDevice>,
        to: Arc<tun_rs::SyncDevice>,
        mut direction: Direction,
        counters: Arc<Counters>,
    ) {
        let queue = Arc::new((Mutex::new(BinaryHeap::<Due>::new()), Condvar::new()));
        let (stop, read_queue, read_counters) =
            (self.stop.clone(), queue.clone(), counters.clone());
        let (down_until, started) = (self.down_until.clone(), self.started);
        self.threads.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; MTU + 64];
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if !readable(from.as_raw_fd(), Duration::from_millis(50)) {
                    continue;
                }
                let Ok(len) = from.recv(&mut buf) else {
                    continue;
                };
                read_counters.packets.fetch_add(1, Ordering::Relaxed);
                let now = Instant::now();
                let since = now.saturating_duration_since(started).as_micros() as u64;
                let cut = since < down_until.load(Ordering::Relaxed);
                let fate = if cut {
                    Fate::Dropped(Dropped::Outage)
                } else {
                    direction.admit(len, now)
                };
                let counter = match fate {
                    Fate::Arrives(times) => {
                        let (lock, ready) = &*read_queue;
                        let mut heap = lock.lock().expect("link queue");
                        for at in times {
                            if heap.len() >= MAX_IN_FLIGHT {
                                read_counters.queue_full.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            seq += 1;
                            heap.push(Due {
                                at,
                                seq,
                                packet: buf[..len].to_vec(),
                            });
                        }
                        ready.notify_one();
                        continue;
                    }
                    Fate::Dropped(Dropped::Lost) => &read_counters.lost,
                    Fate::Dropped(Dropped::QueueFull) => &read_counters.queue_full,
                    Fate::Dropped(Dropped::Outage) => &read_counters.outage,
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
            read_queue.1.notify_all();
        }));
        let stop = self.stop.clone();
        self.threads.push(std::thread::spawn(move || {
            let (lock, ready) = &*queue;
            let mut heap = lock.lock().expect("link queue");
            while !stop.load(Ordering::Relaxed) {
                let now = Instant::now();
                match heap.peek() {
                    Some(due) if due.at <= now => {
                        let due = heap.pop().expect("peeked");
                        drop(heap);
                        if to.send(&due.packet).is_ok() {
                            counters.delivered.fetch_add(1, Ordering::Relaxed);
                            counters
                                .bytes
                                .fetch_add(due.packet.len() as u64, Ordering::Relaxed);
                        }
                        heap = lock.lock().expect("link queue");
                    }
                    Some(due) => {
                        let wait = due.at - now;
                        heap = ready.wait_timeout(heap, wait).expect("link queue").0;
                    }
                    None => {
                        heap = ready
                            .wait_timeout(heap, Duration::from_millis(50))
                            .expect("link queue")
                            .0;
                    }
                }
            }
        }));
    }

    /// Takes the link down, both ways, for `how_long` from now (an outage
    /// at a moment the test chooses; `LinkConfig::outages` are fixed at
    /// the start).
    pub fn cut(&self, how_long: Duration) {
        let until = (self.started.elapsed() + how_long).as_micros() as u64;
        self.down_until.store(until, Ordering::Relaxed);
    }

    /// The server namespace's name (`ip netns exec NAME ...`).
    pub fn server_ns(&self) -> &str {
        &self.server_ns
    }

    /// The client namespace's name.
    pub fn client_ns(&self) -> &str {
        &self.client_ns
    }

    /// `program` to run in the server namespace (`ip netns exec`).
    pub fn server_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        in_namespace(&self.server_ns, program)
    }

    /// `program` to run in the client namespace.
    pub fn client_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        in_namespace(&self.client_ns, program)
    }

    /// Runs `work` on a thread of its own inside the client namespace: the
    /// sockets it opens belong to that namespace for their whole life,
    /// whichever thread uses them afterwards.
    pub fn in_client<R: Send + 'static>(
        &self,
        work: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, NetemError> {
        in_namespace_thread(&self.client_ns, work)
    }

    /// Likewise in the server namespace.
    pub fn in_server<R: Send + 'static>(
        &self,
        work: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, NetemError> {
        in_namespace_thread(&self.server_ns, work)
    }

    /// What went through so far: client → server, and server → client.
    pub fn stats(&self) -> (DirectionStats, DirectionStats) {
        (self.up.read(), self.down.read())
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        for ns in [&self.server_ns, &self.client_ns] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// A packet due at `at` (the earliest first; `seq` keeps equal times in
/// the order they came).
struct Due {
    at: Instant,
    seq: u64,
    packet: Vec<u8>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // A max-heap: the earliest is the greatest.
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Whether `fd` becomes readable within `wait`.
fn readable(fd: RawFd, wait: Duration) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the length given.
    let ready = unsafe { libc::poll(&mut poll, 1, wait.as_millis() as libc::c_int) };
    ready > 0 && poll.revents & libc::POLLIN != 0
}

fn in_namespace(ns: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new("ip");
    command.args(["netns", "exec", ns]).arg(program);
    command
}

fn in_namespace_thread<R: Send + 'static>(
    ns: &str,
    work: impl FnOnce() -> R + Send + 'static,
) -> Result<R, NetemError> {
    let path = format!("/var/run/netns/{ns}");
    let file = std::fs::File::open(&path).map_err(|e| NetemError::Setns(ns.to_string(), e))?;
    let ns = ns.to_string();
    std::thread::spawn(move || {
        // SAFETY: setns on an open namespace file, for this thread only.
        let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        if entered != 0 {
            return Err(NetemError::Setns(ns, std::io::Error::last_os_error()));
        }
        Ok(work())
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
