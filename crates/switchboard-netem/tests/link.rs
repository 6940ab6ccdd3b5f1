//! The emulator checked against itself, with real kernel sockets in the
//! two namespaces it makes: the round trip it was asked for (and what the
//! forwarder adds), the loss rate over 100,000 packets, the bandwidth and
//! its queue's bound, TCP through loss, and nothing left behind. Needs
//! root (CI runs as root); without it each test says so and passes.

use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_netem::{Link, LinkConfig, NetemError, SERVER_ADDR};

/// One measurement at a time: the tests pace packets by spinning, and two
/// at once on a 2-core machine would measure each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The link, and the turn to measure through it (held for the test).
struct Measured {
    link: Link,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl std::ops::Deref for Measured {
    type Target = Link;
    fn deref(&self) -> &Link {
        &self.link
    }
}

/// A link, or `None` (said once) where this process may not make one.
fn link(up: LinkConfig, down: LinkConfig) -> Option<Measured> {
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    match Link::start(up, down) {
        Ok(link) => Some(Measured { link, _turn: turn }),
        Err(NetemError::NeedsRoot) => {
            eprintln!("skipped: the network emulator needs root (CI runs as root)");
            None
        }
        Err(err) => panic!("{err}"),
    }
}

fn each_way(ms: u64) -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(ms),
        ..LinkConfig::default()
    }
}

/// A UDP server on the server side, until `stop`: counts what it got, and
/// echoes it when `echoes`. Its receive buffer is large (4 MiB), so that
/// every loss is the link's.
fn serve_udp(link: &Link, port: u16, echoes: bool, stop: Arc<AtomicBool>, got: Arc<AtomicU64>) {
    let socket = link
        .in_server(move || UdpSocket::bind((SERVER_ADDR, port)))
        .unwrap()
        .unwrap();
    let size: libc::c_int = 4 << 20;
    // SAFETY: a valid socket and an int option of its size.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&socket),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = socket.recv_from(&mut buf) {
                got.fetch_add(1, Ordering::Relaxed);
                if echoes {
                    let _ = socket.send_to(&buf[..n], from);
                }
            }
        }
    });
}

fn client_udp(link: &Link) -> UdpSocket {
    link.in_client(|| UdpSocket::bind("0.0.0.0:0"))
        .unwrap()
        .unwrap()
}

#[test]
fn the_round_trip_is_what_was_asked_plus_the_forwarders_own_cost() {
    let Some(link) = link(each_way(25), each_way(25)) else {
        return;
    };
    let (stop, got) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    serve_udp(&link, 9000, true, stop.clone(), got);
    let client = client_udp(&link);
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let to = SocketAddr::from((SERVER_ADDR, 9000));
    let mut rtts = Vec::new();
    for i in 0..50u32 {
        let sent = Instant::now();
        client.send_to(&i.to_be_bytes(), to).unwrap();
        let mut buf = [0u8; 16];
        let (n, _) = client.recv_from(&mut buf).expect("an echo");
        assert_eq!(&buf[..n], &i.to_be_bytes());
        rtts.push(sent.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    rtts.sort();
    let median = rtts[rtts.len() / 2];
    let extra = median.saturating_sub(Duration::from_millis(50));
    println!(
        "round trip through 25 ms each way: median {:.2} ms, min {:.2} ms, max {:.2} ms: the forwarder adds {:.2} ms",
        median.as_secs_f64() * 1e3,
        rtts[0].as_secs_f64() * 1e3,
        rtts[rtts.len() - 1].as_secs_f64() * 1e3,
        extra.as_secs_f64() * 1e3
    );
    assert!(rtts[0] >= Duration::from_millis(50), "{:?}", rtts[0]);
    // The bound is the thing tested: what the emulator adds of its own is
    // small beside what it emulates (0.33–0.42 ms measured alone, docs/
    // NETEM.md). 2 ms, 4 % of this link, leaves room for this debug build
    // sharing two cores with the loss test beside it (1.01 ms seen once in
    // a loop of the suite against a 1 ms bound).
    assert!(
        extra < Duration::from_millis(2),
        "{extra:?} more than asked"
    );
}

#[test]
fn loss_over_100000_packets_is_within_a_tenth_of_its_rate() {
    let lossy = LinkConfig {
        loss: 0.02,
        seed: 3,
        ..LinkConfig::default()
    };
    let Some(link) = link(lossy, LinkConfig::default()) else {
        return;
    };
    let (stop, got) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    serve_udp(&link, 9001, false, stop.clone(), got.clone());
    let client = client_udp(&link);
    let to = SocketAddr::from((SERVER_ADDR, 9001));
    // 100,000 packets, paced at 40,000 a second so that no queue on the
    // way drops any: every loss is the link's.
    let started = Instant::now();
    for i in 0..100_000u32 {
        client.send_to(&i.to_be_bytes(), to).unwrap();
        let due = started + Duration::from_micros(25) * i;
        while Instant::now() < due {
            std::hint::spin_loop();
        }
    }
    // Until the link is idle and what it delivered has all been read (the
    // link counts a packet just after writing it): the same, three times
    // in a row.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut same = 0;
    while same < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let delivered = link.stats().0.delivered;
        same = if got.load(Ordering::Relaxed) == delivered {
            same + 1
        } else {
            0
        };
    }
    stop.store(true, Ordering::Relaxed);
    let (up, _) = link.stats();
    let rate = up.lost as f64 / up.packets as f64;
    println!(
        "2 % loss asked: {} of {} lost ({:.3} %); {} arrived",
        up.lost,
        up.packets,
        rate * 100.0,
        got.load(Ordering::Relaxed)
    );
    // The link read (nearly) all of them; a few may be dropped by the
    // kernel before it (the device's queue, when the debug build's
    // forwarder falls behind): those are not the link's losses.
    assert!(up.packets >= 99_000, "{} read", up.packets);
    assert!((0.018..0.022).contains(&rate), "{rate}");
    assert_eq!(
        got.load(Ordering::Relaxed),
        up.delivered,
        "the server got all the link delivered"
    );
}

#[test]
fn the_bandwidth_limit_holds_and_its_queue_drops_past_its_bound() {
    let narrow = LinkConfig {
        bandwidth: Some(1_000_000),
        queue_packets: 100,
        ..LinkConfig::default()
    };
    let Some(link) = link(narrow, LinkConfig::default()) else {
        return;
    };
    let (stop, got) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    serve_udp(&link, 9002, false, stop.clone(), got.clone());
    let client = client_udp(&link);
    let to = SocketAddr::from((SERVER_ADDR, 9002));
    // 2 s of 1,000-byte packets at twice the link's rate.
    let started = Instant::now();
    for i in 0..4000u32 {
        client.send_to(&[0u8; 972], to).unwrap();
        let due = started + Duration::from_micros(500) * i;
        while Instant::now() < due {
            std::hint::spin_loop();
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (up, _) = link.stats();
    let rate = up.bytes as f64 / took.as_secs_f64();
    println!(
        "1 MB/s asked: {:.0} kB/s delivered; {} of {} dropped by the full queue",
        rate / 1e3,
        up.queue_full,
        up.packets
    );
    assert!((850_000.0..1_100_000.0).contains(&rate), "{rate}");
    assert!(
        up.queue_full > 1000,
        "about half dropped: {}",
        up.queue_full
    );
}

#[test]
fn kernel_tcp_carries_a_megabyte_through_five_percent_loss_and_nothing_is_left_behind() {
    let lossy = LinkConfig {
        delay: Duration::from_millis(10),
        loss: 0.05,
        ..LinkConfig::default()
    };
    let Some(link) = link(lossy.clone(), lossy) else {
        return;
    };
    let listener = link
        .in_server(|| TcpListener::bind((SERVER_ADDR, 9003)))
        .unwrap()
        .unwrap();
    let receiver = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut all = Vec::new();
        std::io::Read::read_to_end(&mut stream, &mut all).unwrap();
        all
    });
    let mut stream = link
        .in_client(|| TcpStream::connect((SERVER_ADDR, 9003)))
        .unwrap()
        .unwrap();
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    std::io::Write::write_all(&mut stream, &data).unwrap();
    drop(stream);
    assert_eq!(receiver.join().unwrap(), data, "every byte, in order");
    let (up, down) = link.stats();
    assert!(up.lost > 0 && down.lost > 0, "{up:?} {down:?}");
    let names = (link.server_ns().to_string(), link.client_ns().to_string());
    drop(link.link);
    let listed = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        !listed.contains(&names.0) && !listed.contains(&names.1),
        "{listed}"
    );
}

#[test]
fn the_forwarders_own_latency_at_ten_thousand_packets_a_second_is_reported() {
    let Some(link) = link(LinkConfig::default(), LinkConfig::default()) else {
        return;
    };
    let (stop, got) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    serve_udp(&link, 9004, true, stop.clone(), got);
    let client = Arc::new(client_udp(&link));
    client
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let to = SocketAddr::from((SERVER_ADDR, 9004));
    let started = Instant::now();
    // 10,000 packets in one second (5,000 each way), each stamped with its
    // send time: the echo's round trip through a link asked for no delay
    // is the forwarder's own cost, twice.
    let reader = {
        let client = client.clone();
        std::thread::spawn(move || {
            let mut rtts = Vec::new();
            let mut buf = [0u8; 16];
            while let Ok((n, _)) = client.recv_from(&mut buf) {
                if n == 8 {
                    let sent = u64::from_be_bytes(buf[..8].try_into().unwrap());
                    rtts.push(started.elapsed().as_micros() as u64 - sent);
                }
            }
            rtts
        })
    };
    for i in 0..5000u32 {
        let due = started + Duration::from_micros(200) * i;
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        let stamp = started.elapsed().as_micros() as u64;
        client.send_to(&stamp.to_be_bytes(), to).unwrap();
    }
    let mut rtts = reader.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    rtts.sort_unstable();
    let at = |q: f64| rtts[((rtts.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    println!(
        "the forwarder at 10,000 packets a second (5,000 each way): round trip with no delay asked p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms; {} of 5,000 echoed",
        at(0.5),
        at(0.99),
        at(1.0),
        rtts.len()
    );
    assert!(rtts.len() >= 4_950, "{} echoed", rtts.len());
    // A report, with a bound that a working forwarder meets even on a busy
    // machine (here: 0.6 ms alone, 1.1 ms beside other tests).
    assert!(at(0.5) < 5.0, "{} ms", at(0.5));
}
