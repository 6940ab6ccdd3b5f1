//! `switchboard-server netsim`: a loopback proxy that makes a real network
//! of a local one (`docs/SMOOTHING.md`): every connection to `--listen` is
//! piped to `--to`, each direction through a simulated link (latency,
//! jitter, a bandwidth cap, the stalls of a retransmission) with a seed, so
//! any client (native, JavaScript over WebSocket, AxisPy) sees what a
//! player far away would.

use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::Args;
use switchboard::harness::netsim::{Link, NetSimConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::runtime;

#[derive(Debug, Args)]
pub(crate) struct NetsimArgs {
    /// Where clients connect (a loopback address: this is a test tool).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The server each connection is piped to.
    #[arg(long)]
    to: SocketAddr,
    /// One-way delay, each direction.
    #[arg(long, default_value_t = 75)]
    latency_ms: u64,
    /// Up to this much more per chunk, drawn uniformly (order is kept).
    #[arg(long, default_value_t = 20)]
    jitter_ms: u64,
    /// Bytes a second each direction carries (0: no cap).
    #[arg(long, default_value_t = 0)]
    bandwidth: u64,
    /// A stall (a lost segment being sent again) starts this often (0:
    /// never)...
    #[arg(long, default_value_t = 3000)]
    stall_every_ms: u64,
    /// ...and holds each direction this long; then what waited arrives.
    #[arg(long, default_value_t = 200)]
    stall_ms: u64,
    /// The seed of the jitter: the same seed, the same delays.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Connections piped at once at most.
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
    /// Bytes held in a direction's link at most: past them the proxy stops
    /// reading that side until some are delivered.
    #[arg(long, default_value_t = 4 << 20)]
    max_in_flight: usize,
}

pub(crate) fn run_netsim(args: NetsimArgs) -> Result<(), String> {
    if !args.listen.ip().is_loopback() {
        return Err(format!(
            "--listen {}: the simulator listens on loopback only (it is a test tool)",
            args.listen
        ));
    }
    runtime()?.block_on(async move {
        let listener = TcpListener::bind(args.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        println!("{}", switchboard::process::ready_line(addr.port()));
        // After the ready line, whoever started it may have stopped
        // reading: a closed stdout is not the proxy's failure.
        let _ = writeln!(
            std::io::stdout(),
            "netsim: {addr} -> {} with {} ms one way, {} ms jitter, a {} ms stall every {} ms",
            args.to,
            args.latency_ms,
            args.jitter_ms,
            args.stall_ms,
            args.stall_every_ms
        );
        tokio::select! {
            _ = switchboard::process::wait_for_signal() => Ok(()),
            failed = serve(listener, &args) => failed,
        }
    })
}

/// Pipes every connection to `--listen` through its two simulated links,
/// until accepting fails.
async fn serve(listener: TcpListener, args: &NetsimArgs) -> Result<(), String> {
    let slots = std::sync::Arc::new(Semaphore::new(args.max_connections.max(1)));
    let start = Instant::now();
    let mut connections = 0u64;
    loop {
        let (client, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Full: the connection is closed at once.
            continue;
        };
        connections += 1;
        let config = |direction: u64| NetSimConfig {
            latency: Duration::from_millis(args.latency_ms),
            jitter: Duration::from_millis(args.jitter_ms),
            bandwidth: args.bandwidth,
            stall_every: Duration::from_millis(args.stall_every_ms),
            stall: Duration::from_millis(args.stall_ms),
            seed: args.seed.wrapping_add(connections * 2 + direction),
        };
        let (up, down) = (config(0), config(1));
        let (to, limit) = (args.to, args.max_in_flight);
        tokio::spawn(async move {
            let _slot = slot;
            let Ok(server) = TcpStream::connect(to).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            tokio::join!(
                pipe(client_read, server_write, up, start, limit),
                pipe(server_read, client_write, down, start, limit),
            );
        });
    }
}

/// One direction: what `from` sends goes through a simulated link to `to`;
/// at `from`'s end, what is in flight is still delivered, then `to`'s
/// write half is shut.
async fn pipe(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    config: NetSimConfig,
    start: Instant,
    max_in_flight: usize,
) {
    let mut link: Link<Vec<u8>> = Link::new(config);
    let (mut in_flight, mut open) = (0usize, true);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let now = start.elapsed();
        while let Some(chunk) = link.poll(now) {
            in_flight -= chunk.len();
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        if !open && link.in_flight() == 0 {
            let _ = to.shutdown().await;
            return;
        }
        let wake = link
            .next_arrival()
            .map(|at| at.saturating_sub(start.elapsed()));
        let reading = open && in_flight < max_in_flight;
        tokio::select! {
            read = from.read(&mut buf), if reading => match read {
                Ok(0) | Err(_) => open = false,
                Ok(n) => {
                    in_flight += n;
                    link.send(start.elapsed(), buf[..n].to_vec(), n);
                }
            },
            _ = tokio::time::sleep(wake.unwrap_or(Duration::from_secs(3600))), if wake.is_some() => {}
        }
    }
}
