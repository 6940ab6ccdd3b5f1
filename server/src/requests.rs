//! A load test of the manager path: clients that join a board server and
//! send requests (`Say`) at a fixed rate; every accepted one is validated by
//! the game's `GameLogic` and broadcast to every client. Measures accepted
//! requests and deliveries per second and the request → accepted latency;
//! `switchboard-server requests` runs it and adds the server's CPU.
//!
//! The clients speak the session protocol themselves (hello, welcome,
//! request frames, verdicts) on plain sockets, spread over 127.x.y.z as the
//! relay's bots are, so that thousands fit in one process.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchboard::histogram::Histogram;
use switchboard::manager::protocol::{self, RequestFrame, SessionHello};
use switchboard::message::{TypedMessage, SESSION_CHANNEL};
use switchboard::socket::SocketEvent;
use switchboard_load::{admitted, Via};
use tokio::time::Instant;

use crate::board::Board;

/// What to run.
#[derive(Debug, Clone)]
pub struct RequestLoad {
    /// The board server.
    pub addr: SocketAddr,
    /// The board server's QUIC address: when set, the clients connect
    /// there instead (their requests on the QUIC connection's stream).
    pub quic: Option<SocketAddr>,
    /// Clients.
    pub clients: usize,
    /// Requests a second per client.
    pub rate: f64,
    /// How long to send.
    pub duration: Duration,
    /// TLS under each client's connection (none: plain, for a server on
    /// loopback), the server checked by its trust.
    pub tls: Option<switchboard::tls::TlsClient>,
}

/// What it measured.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RequestReport {
    /// Clients that were welcomed.
    pub welcomed: usize,
    /// Seconds of sending.
    pub seconds: f64,
    /// Requests sent.
    pub sent: u64,
    /// Requests accepted.
    pub accepted: u64,
    /// Requests rejected or failed.
    pub refused: u64,
    /// Broadcast lines received, by all clients together.
    pub deliveries: u64,
    /// Accepted per second.
    pub accepted_per_second: f64,
    /// Deliveries per second.
    pub deliveries_per_second: f64,
    /// Request sent → accepted received, ms.
    pub latency_ms_p50: f64,
    /// 99th percentile.
    pub latency_ms_p99: f64,
    /// The slowest.
    pub latency_ms_max: f64,
    /// Clients disconnected before the end.
    pub disconnects: u64,
}

#[derive(Debug, Default)]
struct Counts {
    welcomed: bool,
    sent: u64,
    accepted: u64,
    refused: u64,
    deliveries: u64,
    disconnected: bool,
}

/// Runs the test.
pub async fn run(load: RequestLoad) -> RequestReport {
    let totals = Arc::new(Mutex::new((Vec::new(), Histogram::new())));
    // Everyone joins before anyone sends, arriving in a stream (the server
    // bounds connections still in their handshake), 50 every 20 ms.
    let start = Instant::now() + Duration::from_millis(1000 + load.clients as u64 / 2);
    let end = start + load.duration;
    let mut clients = Vec::new();
    for index in 0..load.clients {
        let totals = totals.clone();
        let load = load.clone();
        clients.push(tokio::spawn(async move {
            let mut histogram = Histogram::new();
            let counts = client(index, &load, start, end, &mut histogram).await;
            let mut totals = totals.lock().expect("totals");
            totals.0.push(counts);
            totals.1.merge(&histogram);
        }));
        if index % 50 == 49 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    for client in clients {
        let _ = client.await;
    }
    let totals = totals.lock().expect("totals");
    let (counts, histogram) = &*totals;
    let seconds = load.duration.as_secs_f64();
    let sum = |f: fn(&Counts) -> u64| counts.iter().map(f).sum::<u64>();
    let (accepted, deliveries) = (sum(|c| c.accepted), sum(|c| c.deliveries));
    RequestReport {
        welcomed: counts.iter().filter(|c| c.welcomed).count(),
        seconds,
        sent: sum(|c| c.sent),
        accepted,
        refused: sum(|c| c.refused),
        deliveries,
        accepted_per_second: accepted as f64 / seconds,
        deliveries_per_second: deliveries as f64 / seconds,
        latency_ms_p50: histogram.percentile_ms(0.5),
        latency_ms_p99: histogram.percentile_ms(0.99),
        latency_ms_max: histogram.percentile_ms(1.0),
        disconnects: sum(|c| u64::from(c.disconnected)),
    }
}

async fn client(
    index: usize,
    load: &RequestLoad,
    start: Instant,
    end: Instant,
    histogram: &mut Histogram,
) -> Counts {
    let mut counts = Counts::default();
    let (to, via) = match load.quic {
        Some(quic) => (quic, Via::Quic),
        None => (load.addr, Via::Tcp),
    };
    // A server busy with handshakes (many clients behind one address)
    // asks some to come back later: they do.
    let mut socket = match admitted(index, to, via, load.tls.as_ref()).await {
        Ok(socket) => socket,
        Err(reason) => {
            tracing::warn!(client = index, %reason, "load client could not join");
            counts.disconnected = true;
            return counts;
        }
    };
    let hello = SessionHello {
        name: format!("load-{index}"),
        password: None,
        credentials: Vec::new(),
        resume: None,
    };
    let _ = socket.send(&protocol::session_message(protocol::HELLO, &hello));
    // Built once: the request's frame is what a client's `request` builds.
    let say = Board::Say("hello, board".into())
        .to_message()
        .expect("a string encodes");
    let period = Duration::from_secs_f64(1.0 / load.rate.max(1e-3));
    let offset = period.mul_f64((index % 97) as f64 / 97.0);
    let stop = tokio::time::sleep_until(end + Duration::from_millis(500));
    let send = tokio::time::sleep_until(start + offset);
    tokio::pin!(stop, send);
    let mut sending = load.rate > 0.0;
    let mut sent_at: HashMap<u64, Instant> = HashMap::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = &mut send, if sending && counts.welcomed => {
                counts.sent += 1;
                let frame = RequestFrame {
                    id: counts.sent,
                    channel: say.channel_id(),
                    action: say.action_id(),
                    content: say.content_bytes().to_vec(),
                };
                let message = protocol::session_message(protocol::REQUEST, &frame);
                if socket.send(&message).is_ok() {
                    sent_at.insert(counts.sent, Instant::now());
                }
                let next = send.deadline() + period;
                sending = next < end;
                send.as_mut().reset(next);
            }
            event = socket.next_event() => {
                let now = Instant::now();
                let mut event = event;
                while let Some(next) = event {
                    if !on_event(next, now, &mut counts, &mut sent_at, histogram) {
                        counts.disconnected = true;
                        return counts;
                    }
                    event = socket.try_next_event();
                }
            }
        }
    }
    socket.close("load test done");
    counts
}

/// Takes one event in; `false` when the connection ended.
fn on_event(
    event: SocketEvent,
    now: Instant,
    counts: &mut Counts,
    sent_at: &mut HashMap<u64, Instant>,
    histogram: &mut Histogram,
) -> bool {
    let message = match event {
        SocketEvent::Received(message) => message,
        SocketEvent::Disconnected(reason) => {
            tracing::warn!(%reason, "load client disconnected");
            return false;
        }
        _ => return true,
    };
    if message.channel_id() != SESSION_CHANNEL {
        if matches!(message.typed::<Board>(), Ok(Board::Line(_))) {
            counts.deliveries += 1;
        }
        return true;
    }
    match message.action_id() {
        protocol::WELCOME => counts.welcomed = true,
        protocol::ACCEPTED => {
            let sent = message
                .content::<u64>()
                .ok()
                .and_then(|id| sent_at.remove(&id));
            if let Some(sent) = sent {
                counts.accepted += 1;
                histogram.record(now.saturating_duration_since(sent));
            }
        }
        protocol::REJECTED | protocol::ERROR => counts.refused += 1,
        _ => {}
    }
    true
}
