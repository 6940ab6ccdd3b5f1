//! The load tester: N bots sending transforms at R Hz in zones of Z bots,
//! measuring what the relay carries and how fast.
//!
//! Each transform carries its sender's sequence number and send time (the
//! extra field `stamp`: `[seq, sent_us]`, microseconds since the test
//! began, read back without allocating, see `stamp.rs`); every bot
//! that receives it records the relay latency (receipt minus send time, on
//! the same clock since all bots run in this process) and counts gaps in
//! each sender's sequence as losses. A sender's first message at a bot is
//! counted but not timed: it may be the zone-entry snapshot, which shows the
//! newcomer each member's last transform, however old.
//!
//! In the moving mode (`LoadConfig::walk`, `walk.rs`) the bots walk one
//! world and check what they hear against where the others are: for a relay
//! with interest by distance.
//!
//! Each bot drives the relay's client core
//! (`switchboard_relay::client_core::RelayClientCore`), as the relay's
//! scripted bots and the Bevy plugin do.
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | the root | [`LoadConfig`], [`run`], [`LoadReport`]: the test, its groups of bots, the totals |
//! | `bot` | one bot: connects, sends stamped transforms, takes in what it hears |
//! | `connect` | [`open`]: a connection over TCP, TLS, WebSocket or QUIC, from a loopback address of its own (the `requests` tester's too) |
//! | `stamp` | the stamp in a transform's extra field |
//! | [`walk`](Walk) | the moving mode: where each bot walks, what it should hear |

#![warn(missing_docs)]
#![warn(unreachable_pub)]

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

mod bot;
mod connect;
mod stamp;
mod walk;

pub use connect::{admitted, connect_from, open, source_address, Via};
use switchboard::histogram::Histogram;
pub use walk::Walk;

/// Bots that share one task: their futures are polled together, so a read
/// that wakes one bot while its group is already running costs no task
/// wake-up, and their latencies go into one histogram that stays in the
/// cache (a histogram per bot, 10 MiB for 1,000 bots, did not).
const GROUP: usize = 25;

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// The relay's native address.
    pub addr: SocketAddr,
    /// The relay's WebSocket address: when set, the bots connect there
    /// instead (the same protocol, one frame per WebSocket message), to
    /// compare what a WebSocket client costs.
    pub websocket: Option<SocketAddr>,
    /// The relay's QUIC address: when set, the bots connect there instead
    /// and ask for datagrams (`RelayOptions::datagrams`): their transforms
    /// and what they hear travel as QUIC datagrams (compact view datagrams
    /// when `options.compact`). Takes precedence over `websocket`.
    pub quic: Option<SocketAddr>,
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
    /// The moving mode (default none: bots stand in zones of `zone_size`):
    /// all bots in one world, walking, checking what they hear against a
    /// relay with interest by distance.
    pub walk: Option<Walk>,
    /// What the bots ask of the relay ([`RelayOptions`](switchboard_relay::RelayOptions);
    /// default nothing): batches (a write's messages in one frame), compact
    /// transforms.
    pub options: switchboard_relay::RelayOptions,
    /// Every how many transforms carry the load tester's stamp (its
    /// sequence number and send time, in an extra field); 1, every one.
    /// The others carry no extra field, so that a walking bot's compact
    /// traffic is a game's rather than the stamp's (about 20 bytes each
    /// time). Latency is timed on the stamped ones; losses are counted
    /// from their sequence numbers and the transforms heard between them.
    pub stamp_every: u32,
    /// TLS under each bot's connection (default none: plain, for a relay
    /// on loopback), the relay checked by its trust: what a relay beyond
    /// loopback speaks, measured on the path players take.
    pub tls: Option<switchboard::tls::TlsClient>,
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
    /// Bytes per second of relayed messages received by the bots (their
    /// content, and about 10 bytes of frame each).
    pub bytes_per_second: f64,
    /// Bytes the bots read off the wire (frames, handshakes, keep-alives:
    /// everything) divided by the transforms delivered: what a relayed
    /// transform costs on the wire.
    pub wire_bytes_per_delivery: f64,
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
    /// Transforms a receiver never heard because the sender sent them
    /// before the receiver was in its zone: a newcomer is shown each
    /// player's last transform, not the ones before it (the first stamp a
    /// receiver hears from a sender, when over 0). Not a loss: on a busy
    /// machine a bot's first send may come a period late.
    pub before_joining: u64,
    /// Bots disconnected before the end.
    pub disconnects: u64,
    /// Bots handed over to their zone's relay (several relays).
    pub handovers: u64,
    /// Datagrams the bots' QUIC connections delivered (0 over TCP and
    /// WebSocket).
    pub datagrams_received: u64,
    /// Errors reported by the relay or the connections.
    pub errors: u64,
    /// Walking: neighbour checks made (a bot that stayed well inside
    /// another's view radius for a window).
    pub neighbour_checks: u64,
    /// Walking: of those, neighbours not heard within the window.
    pub unheard_neighbours: u64,
    /// Walking: transforms heard from past the leave radius.
    pub heard_too_far: u64,
}

/// Live counts for the progress line.
static LIVE_SENT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static LIVE_RECEIVED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// What every bot of a test shares.
#[derive(Debug)]
struct Plan {
    addr: SocketAddr,
    websocket: Option<SocketAddr>,
    quic: Option<SocketAddr>,
    also: Vec<SocketAddr>,
    interval: Option<Duration>,
    zone_size: usize,
    phases: Phases,
    walk: Option<Walk>,
    options: switchboard_relay::RelayOptions,
    stamp_every: u64,
    tls: Option<switchboard::tls::TlsClient>,
    ids: walk::Ids,
    /// The test's clock: stamps are microseconds since then.
    epoch: Instant,
    start: Instant,
    end: Instant,
}

impl Plan {
    /// The relay bot `index` connects to: the relays in turn.
    fn relay_of(&self, index: usize) -> SocketAddr {
        match index % (1 + self.also.len()) {
            0 => self.addr,
            n => self.also[n - 1],
        }
    }
}

#[derive(Debug, Default)]
struct Totals {
    sent: u64,
    received: u64,
    bytes: u64,
    wire_bytes: u64,
    lost: u64,
    before_joining: u64,
    disconnects: u64,
    errors: u64,
    connected: usize,
    handovers: u64,
    datagrams: u64,
    checked: walk::Checked,
}

impl Totals {
    fn add(&mut self, counts: &bot::Counts) {
        self.sent += counts.sent;
        self.received += counts.received;
        self.bytes += counts.bytes;
        self.wire_bytes += counts.wire_bytes;
        self.lost += counts.lost;
        self.before_joining += counts.before_joining;
        self.errors += counts.errors;
        self.connected += usize::from(counts.connected);
        self.disconnects += u64::from(counts.disconnected);
        self.handovers += counts.handovers;
        self.datagrams += counts.datagrams;
        self.checked.checks += counts.checked.checks;
        self.checked.unheard += counts.checked.unheard;
        self.checked.too_far += counts.checked.too_far;
    }
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
    let plan = Arc::new(Plan {
        addr: config.addr,
        websocket: config.websocket,
        quic: config.quic,
        also: config.also.clone(),
        interval: (config.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / config.rate)),
        zone_size: config.zone_size,
        phases: config.phases,
        walk: config.walk.clone(),
        // Over QUIC, compact transforms come as compact view datagrams.
        options: switchboard_relay::RelayOptions {
            datagrams: config.options.datagrams || config.quic.is_some(),
            compact_datagrams: config.options.compact_datagrams
                || (config.quic.is_some() && config.options.compact),
            ..config.options
        },
        stamp_every: u64::from(config.stamp_every.max(1)),
        tls: config.tls.clone(),
        ids: walk::Ids::new(config.bots),
        epoch,
        start: start_sending,
        end,
    });
    let groups: Vec<_> = (0..config.bots)
        .step_by(GROUP)
        .map(|first| {
            let plan = plan.clone();
            let bots = first..(first + GROUP).min(config.bots);
            tokio::spawn(async move {
                let histogram = Mutex::new(Histogram::new());
                let running: FuturesUnordered<_> =
                    bots.map(|i| bot::run(&plan, i, &histogram)).collect();
                let counts: Vec<bot::Counts> = running.collect().await;
                (counts, histogram.into_inner().expect("histogram"))
            })
        })
        .collect();
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
    let (mut t, mut h) = (Totals::default(), Histogram::new());
    for group in groups {
        if let Ok((counts, histogram)) = group.await {
            counts.iter().for_each(|c| t.add(c));
            h.merge(&histogram);
        }
    }
    let seconds = config.duration.as_secs_f64();
    LoadReport {
        bots_connected: t.connected,
        seconds,
        sent: t.sent,
        received: t.received,
        sent_per_second: t.sent as f64 / seconds,
        received_per_second: t.received as f64 / seconds,
        bytes_per_second: t.bytes as f64 / seconds,
        wire_bytes_per_delivery: t.wire_bytes as f64 / t.received.max(1) as f64,
        latency_ms_p50: h.percentile_ms(0.50),
        latency_ms_p95: h.percentile_ms(0.95),
        latency_ms_p99: h.percentile_ms(0.99),
        latency_ms_max: h.max_ms(),
        lost: t.lost,
        before_joining: t.before_joining,
        disconnects: t.disconnects,
        errors: t.errors,
        handovers: t.handovers,
        datagrams_received: t.datagrams,
        neighbour_checks: t.checked.checks,
        unheard_neighbours: t.checked.unheard,
        heard_too_far: t.checked.too_far,
    }
}
