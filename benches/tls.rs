//! What TLS costs on the path users take, beside plain in the same run:
//! the CPU of N connections opened and closed (TCP, TLS 1.3 handshake on
//! both sides, the protocol's hello) against N plain ones, and the
//! throughput of one connection's messages over TLS against plain.
//! `cargo bench --bench tls` (`BENCH_TLS_CONNECTIONS`, default 1000;
//! `BENCH_TLS_MESSAGES`, default 200000). Client and server are in this one
//! process: the CPU figures are both sides' together.

use std::time::{Duration, Instant};

use switchboard::socket::Dialer;
use switchboard::tls::{ServerIdentity, ServerTrust, TlsServer};
use switchboard::{
    BindScope, EndpointConfig, EndpointEvent, EndpointStream, Message, SocketConfig, SocketEvent,
};

switchboard::channels! { enum Chan { Data = 16 } }
switchboard::actions! { enum Act { Move = 1 } }

/// CPU seconds this process has used (user and system).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A server on every interface (TLS for TLS clients, plain for plain ones
/// from this machine), and the dialer and address a client of each kind uses.
fn server() -> (EndpointStream, [(Dialer, String); 2]) {
    let identity = ServerIdentity::generate().unwrap();
    let config = EndpointConfig {
        tls: switchboard::tls::TlsSettings::serving(TlsServer::new(&identity).unwrap()),
        max_pending_handshakes: 4096,
        max_pending_handshakes_per_address: 4096,
        max_connections_per_address: 100_000,
        max_connections: 100_000,
        ..EndpointConfig::default()
    };
    let server = EndpointStream::bind(BindScope::AllInterfaces, 0, config).unwrap();
    let addr = format!("127.0.0.1:{}", server.local_addr().port());
    let tls = Dialer::default().trust(ServerTrust::pinned(identity.fingerprint()));
    (
        server,
        [
            (Dialer::default(), addr.clone()),
            (tls, format!("tls://{addr}")),
        ],
    )
}

/// Opens `n` connections one after another, each to its `Connected`, and
/// closes them; the CPU seconds it took.
fn connections(server: &mut EndpointStream, dialer: &Dialer, addr: &str, n: usize) -> f64 {
    let runtime = switchboard::runtime::handle();
    let before = cpu_seconds();
    for _ in 0..n {
        let mut client = dialer.connect(addr, SocketConfig::default()).into_stream();
        runtime.block_on(async {
            match tokio::time::timeout(Duration::from_secs(10), client.next_event()).await {
                Ok(Some(SocketEvent::Connected)) => {}
                other => panic!("{other:?}"),
            }
            while let Some(event) = server.try_next_event() {
                drop(event);
            }
        });
    }
    cpu_seconds() - before
}

/// Sends `n` messages of 32 bytes over one connection; messages a second.
fn throughput(server: &mut EndpointStream, dialer: &Dialer, addr: &str, n: usize) -> f64 {
    let runtime = switchboard::runtime::handle();
    let mut client = dialer.connect(addr, SocketConfig::default()).into_stream();
    runtime.block_on(async {
        assert!(matches!(
            client.next_event().await,
            Some(SocketEvent::Connected)
        ));
        let message = Message::new(Chan::Data, Act::Move, &[7u8; 32]).unwrap();
        let started = Instant::now();
        let mut received = 0;
        let mut sent = 0;
        // At most a window ahead: within the socket's outbound queue (past
        // it the sender is a slow consumer of its own queue).
        let window = SocketConfig::default().outbound_queue_len / 2;
        while received < n {
            while sent < n && sent - received < window {
                client.send(&message).expect("within the window");
                sent += 1;
            }
            match server.next_event().await {
                Some(EndpointEvent::Received(_)) => received += 1,
                Some(_) => {}
                None => panic!("server ended"),
            }
        }
        n as f64 / started.elapsed().as_secs_f64()
    })
}

fn main() {
    let n = env("BENCH_TLS_CONNECTIONS", 1000);
    let messages = env("BENCH_TLS_MESSAGES", 200_000);
    let (mut server, [(plain, plain_addr), (tls, tls_addr)]) = server();
    // Warm up both paths once.
    connections(&mut server, &plain, &plain_addr, 10);
    connections(&mut server, &tls, &tls_addr, 10);
    let plain_cpu = connections(&mut server, &plain, &plain_addr, n);
    let tls_cpu = connections(&mut server, &tls, &tls_addr, n);
    println!(
        "{n} connections, both sides' CPU: plain {plain_cpu:.2} s, TLS {tls_cpu:.2} s \
         ({:.2}x; TLS adds {:.0} us a connection)",
        tls_cpu / plain_cpu.max(1e-9),
        (tls_cpu - plain_cpu) / n as f64 * 1e6
    );
    let plain_rate = throughput(&mut server, &plain, &plain_addr, messages);
    let tls_rate = throughput(&mut server, &tls, &tls_addr, messages);
    println!(
        "{messages} messages of 32 bytes on one connection: plain {:.0}/s, TLS {:.0}/s \
         (TLS at {:.2}x of plain)",
        plain_rate,
        tls_rate,
        tls_rate / plain_rate
    );
}
