//! The load tester: N bots sending transforms at R Hz in zones of Z bots,
//! measuring what the relay carries and how fast.
//!
//! Each transform carries its sender's sequence number and send time (the
//! extra field `stamp`: `[seq, sent_us]`, microseconds since the test
//! began, read back without allocating, see `stamp.rs`); every bot
//! that receives it records the relay latency (receipt minus send time, on
//! the same clock since all bots run in this process) and counts gaps in
//! each sender's sequence as losses.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::server::{Hello, RelayAction, RelayChannel};
use crate::stamp::{self, Stamp};
use crate::transform::Transform;
use switchboard::message::Message;
use switchboard::socket::{SocketConfig, SocketEvent, SocketStream};

/// Bots that share one source address when the relay is on loopback.
const BOTS_PER_ADDRESS: usize = 4;

/// Where bot `index` connects from: against a relay on IPv4 loopback, the
/// bots spread over the loopback network (127.0.x.y), a few per address,
/// as players come from many homes; the relay's per-address limits then
/// apply as they would in production. Elsewhere, the system's choice.
pub fn source_address(index: usize, relay: SocketAddr) -> Option<SocketAddr> {
    if !(relay.is_ipv4() && relay.ip().is_loopback()) {
        return None;
    }
    let host = index / BOTS_PER_ADDRESS;
    let ip = std::net::Ipv4Addr::new(
        127,
        1 + (host / 250 / 256) as u8,
        (host / 250 % 256) as u8,
        2 + (host % 250) as u8,
    );
    Some(SocketAddr::new(ip.into(), 0))
}

/// Connects to `to` from the local address `from` (no delay on).
pub async fn connect_from(
    from: SocketAddr,
    to: SocketAddr,
) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(from)?;
    let stream = socket.connect(to).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// The relay's native address.
    pub addr: SocketAddr,
    /// The relay's WebSocket address: when set, the bots connect there
    /// instead (the same protocol, one frame per WebSocket message), to
    /// compare what a WebSocket client costs.
    pub websocket: Option<SocketAddr>,
    /// More relays of the same service (`RelayConfig::zones`): bot `i`
    /// connects to the `i`-th address of `addr` and these, in turn, and
    /// follows its zone's relay when redirected.
    pub also: Vec<SocketAddr>,
    /// Bots.
    pub bots: usize,
    /// Transforms per second per bot; 0 holds idle connections (a hello,
    /// then only the socket's keep-alives), to measure what the relay
    /// spends per connection.
    pub rate: f64,
    /// Bots per zone.
    pub zone_size: usize,
    /// How long to send.
    pub duration: Duration,
    /// When in its interval each bot sends.
    pub phases: Phases,
}

/// When in its interval each bot sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phases {
    /// Each bot at its own point of the interval, a golden ratio's fraction
    /// of it after the bot before: a zone's members are spread over the
    /// whole interval, as independent players' clocks are.
    #[default]
    Spread,
    /// Bot `i` at `(i % 97) / 97` of the interval: a zone's members (neighbours
    /// by index) send within about a fifth of the interval of each other,
    /// so a player's deliveries come in bursts that share writes well. The
    /// load tester's phases before 2026-12-01, to compare with its figures.
    Clustered,
}

impl Phases {
    /// Where in its interval bot `index` sends, as a fraction of it.
    fn of(self, index: usize) -> f64 {
        match self {
            Phases::Spread => (index as f64 * 0.618_033_988_749_895).fract(),
            Phases::Clustered => (index % 97) as f64 / 97.0,
        }
    }
}

/// What a load test measured.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct LoadReport {
    /// Bots that connected.
    pub bots_connected: usize,
    /// Seconds of sending.
    pub seconds: f64,
    /// Transforms sent.
    pub sent: u64,
    /// Transforms received (by all bots together).
    pub received: u64,
    /// Sent per second.
    pub sent_per_second: f64,
    /// Received per second.
    pub received_per_second: f64,
    /// Bytes per second received by the bots (frames as on the wire).
    pub bytes_per_second: f64,
    /// Relay latency percentiles and maximum, milliseconds.
    pub latency_ms_p50: f64,
    /// 95th percentile.
    pub latency_ms_p95: f64,
    /// 99th percentile.
    pub latency_ms_p99: f64,
    /// Maximum.
    pub latency_ms_max: f64,
    /// Transforms missing from a sender's sequence at a receiver.
    pub lost: u64,
    /// Bots disconnected before the end.
    pub disconnects: u64,
    /// Bots handed over to their zone's relay (several relays).
    pub handovers: u64,
    /// Errors reported by the relay or the connections.
    pub errors: u64,
}

/// Latencies in log-linear buckets: each power of two of microseconds is
/// cut into [`SUB_BUCKETS`] equal parts, so a bucket is at most 1/128 of its
/// value wide (under 1% error) from 1 µs to [`TOP_US`] (67 s), in 10 KiB
/// per bot; and the largest seen, exactly (an overloaded run reports its
/// real seconds, not a cap).
#[derive(Debug)]
pub struct Histogram {
    buckets: Vec<u32>,
    max_us: u64,
    count: u64,
}

/// Parts of each power of two.
const SUB_BUCKETS: u64 = 128;
/// Powers of two covered: up to 2^26 µs, 67 s.
const POWERS: u32 = 26;
/// The top of the range, µs.
const TOP_US: u64 = 1 << POWERS;

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// Empty.
    pub fn new() -> Self {
        Self {
            // Powers 0 to 6 share the first SUB_BUCKETS (1 µs each).
            buckets: vec![0; (SUB_BUCKETS as usize) * (POWERS as usize - 6)],
            max_us: 0,
            count: 0,
        }
    }

    /// Below `SUB_BUCKETS` a bucket per µs; above, the power of two and the
    /// top seven bits under its leading one.
    fn bucket(us: u64) -> usize {
        let us = us.min(TOP_US - 1);
        if us < SUB_BUCKETS {
            return us as usize;
        }
        let power = 63 - us.leading_zeros() as u64; // 7 and up
        let sub = (us >> (power - 7)) - SUB_BUCKETS;
        ((power - 6) * SUB_BUCKETS + sub) as usize
    }

    /// The middle of bucket `i`, µs.
    fn middle(i: usize) -> f64 {
        let i = i as u64;
        if i < SUB_BUCKETS {
            return i as f64 + 0.5;
        }
        let power = i / SUB_BUCKETS + 6;
        let sub = i % SUB_BUCKETS;
        let width = 1u64 << (power - 7);
        ((SUB_BUCKETS + sub) * width) as f64 + width as f64 / 2.0
    }

    /// Counts one latency of `us` microseconds.
    pub fn record(&mut self, us: u64) {
        let i = Self::bucket(us);
        self.buckets[i] = self.buckets[i].saturating_add(1);
        self.max_us = self.max_us.max(us);
        self.count += 1;
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a = a.saturating_add(*b);
        }
        self.max_us = self.max_us.max(other.max_us);
        self.count += other.count;
    }

    /// The latency below which a fraction `p` of the counts lie, in ms.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = (self.count as f64 * p).ceil() as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += u64::from(*n);
            if seen >= rank && i + 1 < self.buckets.len() {
                return Self::middle(i).min(self.max_us as f64) / 1000.0;
            }
            if seen >= rank {
                // The top bucket holds everything past the range.
                break;
            }
        }
        self.max_us as f64 / 1000.0
    }
}

/// Live counts for the progress line.
static LIVE_SENT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static LIVE_RECEIVED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[derive(Debug, Default)]
struct Totals {
    sent: u64,
    received: u64,
    bytes: u64,
    lost: u64,
    disconnects: u64,
    errors: u64,
    connected: usize,
    handovers: u64,
}

/// Runs the test; `progress` is called about once a second with the totals
/// so far (sent, received).
pub async fn run(config: LoadConfig, mut progress: impl FnMut(Duration, u64, u64)) -> LoadReport {
    LIVE_SENT.store(0, Ordering::Relaxed);
    LIVE_RECEIVED.store(0, Ordering::Relaxed);
    let epoch = Instant::now();
    let start_sending =
        epoch + Duration::from_secs(1) + Duration::from_millis(config.bots as u64 / 2);
    let end = start_sending + config.duration;
    let totals = Arc::new(Mutex::new(Totals::default()));
    let histogram = Arc::new(Mutex::new(Histogram::new()));
    let mut tasks = Vec::with_capacity(config.bots);
    for i in 0..config.bots {
        let zone = format!("zone-{}", i / config.zone_size.max(1));
        let (totals, histogram) = (totals.clone(), histogram.clone());
        let interval = (config.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / config.rate));
        let relays = 1 + config.also.len();
        let addr = match i % relays {
            0 => config.addr,
            n => config.also[n - 1],
        };
        tasks.push(tokio::spawn(load_bot(
            addr,
            config.websocket,
            i,
            zone,
            interval,
            config.phases,
            epoch,
            start_sending,
            end,
            totals,
            histogram,
        )));
        // Arrive in a stream, not all in one instant (the relay bounds
        // connections still in their handshake).
        if i % 50 == 49 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    while Instant::now() < end + Duration::from_millis(500) {
        ticker.tick().await;
        let (sent, received) = (
            LIVE_SENT.load(Ordering::Relaxed),
            LIVE_RECEIVED.load(Ordering::Relaxed),
        );
        progress(
            Instant::now().saturating_duration_since(start_sending),
            sent,
            received,
        );
    }
    for task in tasks {
        let _ = task.await;
    }
    let t = totals.lock().expect("totals");
    let h = histogram.lock().expect("histogram");
    let seconds = config.duration.as_secs_f64();
    LoadReport {
        bots_connected: t.connected,
        seconds,
        sent: t.sent,
        received: t.received,
        sent_per_second: t.sent as f64 / seconds,
        received_per_second: t.received as f64 / seconds,
        bytes_per_second: t.bytes as f64 / seconds,
        latency_ms_p50: h.percentile_ms(0.50),
        latency_ms_p95: h.percentile_ms(0.95),
        latency_ms_p99: h.percentile_ms(0.99),
        latency_ms_max: h.max_us as f64 / 1000.0,
        lost: t.lost,
        disconnects: t.disconnects,
        errors: t.errors,
        handovers: t.handovers,
    }
}

/// A bot's connection to `to` (from its own source address against a
/// loopback relay), over WebSocket when `websocket` is set.
async fn open(index: usize, to: SocketAddr, websocket: bool) -> Option<SocketStream> {
    let url = format!("ws://{to}/");
    match source_address(index, to) {
        Some(from) => match connect_from(from, to).await {
            Ok(stream) if websocket => Some(SocketStream::connect_ws_over(
                &url,
                stream,
                SocketConfig::default(),
            )),
            Ok(stream) => Some(SocketStream::from_stream(stream, SocketConfig::default())),
            Err(err) => {
                tracing::warn!(bot = index, %from, %err, "load bot could not connect");
                None
            }
        },
        None if websocket => Some(SocketStream::connect_ws(&url, SocketConfig::default())),
        None => Some(SocketStream::connect(to, SocketConfig::default())),
    }
}

#[allow(clippy::too_many_arguments)]
async fn load_bot(
    addr: SocketAddr,
    websocket: Option<SocketAddr>,
    index: usize,
    zone: String,
    interval: Option<Duration>,
    phases: Phases,
    epoch: Instant,
    start: Instant,
    end: Instant,
    totals: Arc<Mutex<Totals>>,
    histogram: Arc<Mutex<Histogram>>,
) {
    let Some(mut socket) = open(index, websocket.unwrap_or(addr), websocket.is_some()).await else {
        totals.lock().expect("totals").disconnects += 1;
        return;
    };
    let hello = Hello {
        name: format!("load-{index}"),
        bot: true,
    };
    if let Ok(message) = Message::new(RelayChannel, RelayAction::Hello, &hello) {
        let _ = socket.send(&message);
    }
    let mut local = Histogram::new();
    let mut counts = Counts::default();
    let mut last_seq: HashMap<u32, u64> = HashMap::new();
    let period = interval.unwrap_or(Duration::from_secs(3600));
    let offset = period.mul_f64(phases.of(index));
    let position = [index as f32, 0.0, 0.0];
    let stop = tokio::time::sleep_until(end + Duration::from_millis(300));
    let send = tokio::time::sleep_until(start + offset);
    tokio::pin!(stop, send);
    let mut sending = interval.is_some();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = &mut send, if sending => {
                let stamp = Stamp { seq: counts.sent, sent_us: epoch.elapsed().as_micros() as u64 };
                let extra = BTreeMap::from([(stamp::FIELD.to_string(), stamp.text())]);
                let transform = Transform { position, zone: zone.clone(), extra, ..Transform::default() };
                if socket.send_value(RelayChannel, RelayAction::Transform, &transform).is_ok() {
                    counts.sent += 1;
                    LIVE_SENT.fetch_add(1, Ordering::Relaxed);
                }
                let next = send.deadline() + period;
                sending = next < end;
                send.as_mut().reset(next);
            }
            event = socket.next_event() => {
                // What else has arrived is handled with it, on one reading
                // of the clock.
                let now_us = epoch.elapsed().as_micros() as u64;
                let received = counts.received;
                let mut event = event;
                let mut redirect = None;
                loop {
                    match event {
                        Some(event) => match on_event(event, now_us, &mut counts, &mut last_seq, &mut local) {
                            Next::Go => {}
                            Next::Redirect(to) => {
                                redirect = Some(to);
                                break;
                            }
                            Next::Ended => {
                                tracing::warn!(bot = index, "load bot disconnected");
                                counts.disconnected = true;
                                break;
                            }
                        },
                        None => {
                            counts.disconnected = true;
                            break;
                        }
                    }
                    event = match socket.try_next_event() {
                        Some(next) => Some(next),
                        None => break,
                    };
                }
                LIVE_RECEIVED.fetch_add(counts.received - received, Ordering::Relaxed);
                if let Some(to) = redirect {
                    // The zone lives on another relay: go there, keep the id.
                    let (next, ws) = match (&to.websocket, websocket.is_some()) {
                        (Some(ws), true) => (ws.parse(), true),
                        _ => (to.addr.parse(), false),
                    };
                    let next = match next {
                        Ok(next) => open(index, next, ws).await,
                        Err(_) => None,
                    };
                    let Some(next) = next else {
                        counts.disconnected = true;
                        break;
                    };
                    socket = next;
                    let _ = socket.send_value(RelayChannel, RelayAction::Handover, &to.ticket);
                    counts.handovers += 1;
                }
                if counts.disconnected {
                    break;
                }
            }
        }
    }
    socket.close("load test done");
    let mut t = totals.lock().expect("totals");
    t.sent += counts.sent;
    t.received += counts.received;
    t.bytes += counts.bytes;
    t.lost += counts.lost;
    t.errors += counts.errors;
    t.connected += usize::from(counts.connected);
    t.disconnects += u64::from(counts.disconnected);
    t.handovers += counts.handovers;
    drop(t);
    histogram.lock().expect("histogram").merge(&local);
}

/// One bot's counts.
#[derive(Debug, Default)]
struct Counts {
    sent: u64,
    received: u64,
    bytes: u64,
    lost: u64,
    errors: u64,
    connected: bool,
    disconnected: bool,
    handovers: u64,
}

/// What a bot does after an event.
enum Next {
    Go,
    /// Its zone lives on another relay.
    Redirect(crate::Redirect),
    Ended,
}

/// Takes one event in.
fn on_event(
    event: SocketEvent,
    now_us: u64,
    counts: &mut Counts,
    last_seq: &mut HashMap<u32, u64>,
    histogram: &mut Histogram,
) -> Next {
    match event {
        SocketEvent::Connected => counts.connected = true,
        SocketEvent::Received(message) => {
            counts.bytes += message.content_bytes().len() as u64 + 10;
            match message.action::<RelayAction>() {
                Some(RelayAction::Relayed) => {
                    let Some((player_id, Stamp { seq, sent_us })) =
                        stamp::read(message.content_bytes())
                    else {
                        return Next::Go;
                    };
                    let previous = last_seq.get(&player_id).copied();
                    // A zone-entry snapshot may repeat an old one: skip.
                    if previous.is_some_and(|p| seq <= p) {
                        return Next::Go;
                    }
                    if let Some(p) = previous {
                        counts.lost += seq - p - 1;
                    }
                    last_seq.insert(player_id, seq);
                    counts.received += 1;
                    histogram.record(now_us.saturating_sub(sent_us));
                }
                Some(RelayAction::Error) => counts.errors += 1,
                Some(RelayAction::Redirect) => match message.content() {
                    Ok(redirect) => return Next::Redirect(redirect),
                    Err(_) => counts.errors += 1,
                },
                _ => {}
            }
        }
        SocketEvent::Error(_) => counts.errors += 1,
        SocketEvent::Disconnected(_) => return Next::Ended,
        _ => {}
    }
    Next::Go
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_from_the_histogram_within_one_percent() {
        let mut h = Histogram::new();
        for us in 1..=1000u64 {
            h.record(us * 10);
        }
        for (p, exact) in [(0.5, 5.0), (0.99, 9.9)] {
            let got = h.percentile_ms(p);
            assert!(
                (got - exact).abs() / exact < 0.01,
                "p{p}: {got} for {exact}"
            );
        }
        assert_eq!(h.max_us, 10_000);
        // Seconds too, and past the top the largest is still exact.
        let mut slow = Histogram::new();
        for us in [150_200u64, 2_500_200, 2_500_200, 2_500_200, 90_000_000] {
            slow.record(us);
        }
        let quarter = slow.percentile_ms(0.2);
        assert!((quarter - 150.2).abs() / 150.2 < 0.01, "{quarter}");
        let most = slow.percentile_ms(0.6);
        assert!((most - 2500.2).abs() / 2500.2 < 0.01, "{most}");
        assert_eq!(slow.max_us, 90_000_000);
        assert_eq!(slow.percentile_ms(1.0), 90_000.0);
        // Every value lands in a bucket whose middle is within 1% of it.
        for us in (1..5_000_000u64).step_by(997) {
            let middle = Histogram::middle(Histogram::bucket(us));
            assert!(
                (middle - us as f64).abs() / (us as f64) < 0.01 || us < 100,
                "{us}: {middle}"
            );
        }
        // 10 KiB.
        assert_eq!(std::mem::size_of::<u32>() * h.buckets.len(), 10 * 1024);
    }
}
