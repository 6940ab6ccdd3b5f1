//! One bot of the load tester: connects, sends its stamped transforms,
//! and counts what it receives.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

use crate::stamp::{self, Stamp};
use crate::walk::{Checked, Ids, Walk};
use crate::{admitted, open, Histogram, Plan, Via, LIVE_RECEIVED, LIVE_SENT};
use switchboard::socket::{IdBuildHasher, SocketEvent, SocketStream};
use switchboard_relay::client_core::{Heard, RelayClientCore, RelayClientEvent};
use switchboard_relay::{Redirect, RelayAction, RelayChannel, RelayMovesChannel, Transform};

/// How long a bot waits after the end with nothing arriving.
const QUIET: Duration = Duration::from_millis(300);
/// How long after the end a bot stops whatever still arrives.
const DRAIN: Duration = Duration::from_secs(3);

/// Bot `index` of `plan`, until the test ends: its latencies go into its
/// group's `histogram`, its counts are returned.
pub(crate) async fn run(plan: &Plan, index: usize, histogram: &Mutex<Histogram>) -> Counts {
    let mut counts = Counts::default();
    // Arrive in a stream, not all in one instant (the relay bounds
    // connections still in their handshake): 50 bots every 20 ms.
    tokio::time::sleep_until(plan.epoch + Duration::from_millis(20 * (index / 50) as u64)).await;
    let addr = plan.relay_of(index);
    let websocket = plan.websocket;
    let (to, via) = match (plan.quic, websocket) {
        (Some(quic), _) => (quic, Via::Quic),
        (None, Some(ws)) => (ws, Via::WebSocket),
        (None, None) => (addr, Via::Tcp),
    };
    // A relay busy with handshakes (many bots behind one address) asks
    // some to come back later: they do.
    let mut socket = match admitted(index, to, via, plan.tls.as_ref()).await {
        Ok(socket) => socket,
        Err(reason) => {
            tracing::warn!(bot = index, %reason, "load bot could not join");
            counts.disconnected = true;
            return counts;
        }
    };
    counts.connected = true;
    let mut core = RelayClientCore::new(format!("load-{index}"), true).with_options(plan.options);
    for message in core.opened() {
        let _ = socket.send(&message);
    }
    let mut stamps = Stamps::default();
    let period = plan.interval.unwrap_or(Duration::from_secs(3600));
    let offset = period.mul_f64(plan.phases.of(index));
    // One transform, its stamp rewritten in place for each send.
    // In the browser demo's world (100 × 75 units), spread out; the first
    // zone is the page's default, `demo`.
    let zone = index / plan.zone_size.max(1);
    let mut watch = plan.walk.as_ref().map(|walk| Watch {
        walk,
        index,
        plan_ids: &plan.ids,
        last_heard: HashMap::default(),
        checked: Checked::default(),
    });
    let mut transform = Transform {
        position: [
            5.0 + (index % 10) as f32 * 10.0,
            0.0,
            5.0 + (index / 10 % 7) as f32 * 10.0,
        ],
        zone: if zone == 0 {
            "demo".to_string()
        } else {
            format!("demo-{zone}")
        },
        extra: BTreeMap::from([(stamp::FIELD.to_string(), String::new())]),
        ..Transform::default()
    };
    if watch.is_some() {
        // Walking: one world, interest by distance does the filtering.
        transform.zone = "walk".to_string();
    }
    // A walking bot checks its neighbours once a second, from two seconds
    // in (everyone has joined and been seen by then); a neighbour at the
    // edge hears every fourth transform, so the window is four intervals
    // and half a second.
    let window = period.mul_f64(4.0) + Duration::from_millis(500);
    let mut check =
        tokio::time::interval_at(plan.start + Duration::from_secs(2), Duration::from_secs(1));
    let (end, epoch) = (plan.end, plan.epoch);
    // After the last send, a bot stops once nothing arrived for `QUIET`
    // (what was in flight has come), and at `DRAIN` after the end at the
    // latest: a busy machine's late deliveries are counted, not missed.
    let stop = tokio::time::sleep_until(end + QUIET);
    let send = tokio::time::sleep_until(plan.start + offset);
    tokio::pin!(stop, send);
    let mut sending = plan.interval.is_some();
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => break,
            _ = check.tick(), if watch.is_some() => {
                if let Some(watch) = watch.as_mut() {
                    watch.check(epoch.elapsed().as_micros() as u64, window);
                }
            }
            _ = &mut send, if sending => {
                let stamp = Stamp { seq: counts.sent, sent_us: epoch.elapsed().as_micros() as u64 };
                if let Some(watch) = &watch {
                    transform.position = watch.walk.position(index, stamp.sent_us as f64 / 1e6);
                }
                if counts.sent % plan.stamp_every == 0 {
                    stamp.write(transform.extra.entry(stamp::FIELD.to_string()).or_default());
                } else {
                    transform.extra.remove(stamp::FIELD);
                }
                // What it read of a compact view, with each move and
                // before it: on the moves channel the newest wins, so a move
                // overtaken by it would be dropped.
                if let Some(ack) = core.view_ack() {
                    let _ = socket.send(&ack);
                }
                // A datagram bot's own transforms go on the moves channel.
                let sent = if core.datagrams() {
                    socket.send_value(RelayMovesChannel, RelayAction::Transform, &transform)
                } else {
                    socket.send_value(RelayChannel, RelayAction::Transform, &transform)
                };
                if sent.is_ok() {
                    counts.sent += 1;
                    LIVE_SENT.fetch_add(1, Ordering::Relaxed);
                }
                let next = send.deadline() + period;
                sending = next < end;
                send.as_mut().reset(next);
            }
            event = socket.next_event() => {
                let received = counts.received;
                let next = {
                    let mut histogram = histogram.lock().expect("histogram");
                    let mut seen = Seen {
                        now_us: epoch.elapsed().as_micros() as u64,
                        counts: &mut counts,
                        stamps: &mut stamps,
                        histogram: &mut histogram,
                        watch: &mut watch,
                    };
                    seen.take(event, &mut socket, &mut core)
                };
                LIVE_RECEIVED.fetch_add(counts.received - received, Ordering::Relaxed);
                let now = tokio::time::Instant::now();
                if now + QUIET > stop.deadline() {
                    stop.as_mut().reset((now + QUIET).min(end + DRAIN));
                }
                if let Next::Ended = next {
                    tracing::warn!(bot = index, "load bot disconnected");
                    counts.disconnected = true;
                    break;
                }
                if let Next::Redirect(to) = next {
                    // The zone lives on another relay: go there, keep the id,
                    // on the same transport where that relay has it.
                    let (next, via) = match (&to.websocket, &to.quic, via) {
                        (Some(ws), _, Via::WebSocket) => (ws.parse(), Via::WebSocket),
                        (_, Some(quic), Via::Quic) => (quic.parse(), Via::Quic),
                        _ => (to.addr.parse(), Via::Tcp),
                    };
                    let next = match next {
                        Ok(next) => open(index, next, via, plan.tls.as_ref()).await,
                        Err(_) => None,
                    };
                    let Some(next) = next else {
                        counts.disconnected = true;
                        break;
                    };
                    counts.wire_bytes += socket.handle().stats().bytes_in;
                    socket = next;
                    // The ticket, then the options: a compact stream
                    // starts afresh.
                    core.lost();
                    for message in core.opened() {
                        let _ = socket.send(&message);
                    }
                    counts.handovers += 1;
                }
            }
        }
    }
    counts.wire_bytes += socket.handle().stats().bytes_in;
    counts.datagrams += socket.handle().datagram_stats().map_or(0, |d| d.delivered);
    socket.close("load test done");
    if let Some(watch) = watch {
        counts.checked = watch.checked;
    }
    counts
}

/// One bot's counts.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub(crate) sent: u64,
    pub(crate) received: u64,
    pub(crate) bytes: u64,
    /// Bytes its connections read off the wire (frames, handshake and
    /// keep-alives included).
    pub(crate) wire_bytes: u64,
    pub(crate) lost: u64,
    /// A sender's transforms sent before this bot was in its zone.
    pub(crate) before_joining: u64,
    pub(crate) errors: u64,
    pub(crate) connected: bool,
    pub(crate) disconnected: bool,
    pub(crate) handovers: u64,
    /// Datagrams its QUIC connection delivered.
    pub(crate) datagrams: u64,
    /// What a walking bot's checks found.
    pub(crate) checked: Checked,
}

/// A walking bot's view of the others: when it last heard each, and what
/// its checks found.
struct Watch<'a> {
    walk: &'a Walk,
    index: usize,
    plan_ids: &'a Ids,
    /// Relay id → when last heard, µs since the epoch.
    last_heard: HashMap<u32, u64, IdBuildHasher>,
    checked: Checked,
}

impl Watch<'_> {
    fn heard(&mut self, player_id: u32, position: [f32; 3], now_us: u64) {
        self.last_heard.insert(player_id, now_us);
        let t = now_us as f64 / 1e6;
        self.walk
            .check_heard(self.index, t, position, &mut self.checked);
    }

    fn check(&mut self, now_us: u64, window: Duration) {
        let t = now_us as f64 / 1e6;
        let last_heard = &self.last_heard;
        self.walk.check_neighbours(
            self.index,
            t,
            window,
            self.plan_ids,
            |id| last_heard.get(&id).map(|us| *us as f64 / 1e6),
            &mut self.checked,
        );
    }
}

/// Each sender's last stamp's sequence number, and the transforms heard
/// from it since.
type Stamps = HashMap<u32, (u64, u64), IdBuildHasher>;

/// What a bot takes what it hears into, on one reading of the clock.
struct Seen<'a, 'w> {
    now_us: u64,
    counts: &'a mut Counts,
    stamps: &'a mut Stamps,
    histogram: &'a mut Histogram,
    watch: &'a mut Option<Watch<'w>>,
}

impl Seen<'_, '_> {
    /// Takes in `first` and whatever else has arrived with it; stops at a
    /// redirect or the end of the connection.
    fn take(
        &mut self,
        first: Option<SocketEvent>,
        socket: &mut SocketStream,
        core: &mut RelayClientCore,
    ) -> Next {
        let mut event = first;
        loop {
            let next = match event {
                None | Some(SocketEvent::Disconnected(_)) => return Next::Ended,
                Some(SocketEvent::Connected) => {
                    self.counts.connected = true;
                    Next::Go
                }
                Some(SocketEvent::Error(_)) => {
                    self.counts.errors += 1;
                    Next::Go
                }
                Some(SocketEvent::Received(message)) => {
                    self.counts.bytes += message.content_bytes().len() as u64 + 10;
                    let mut next = Next::Go;
                    core.received(&message, |event| self.event(event, &mut next));
                    next
                }
            };
            if !matches!(next, Next::Go) {
                return next;
            }
            event = socket.try_next_event();
            if event.is_none() {
                return Next::Go;
            }
        }
    }

    /// One thing the relay said.
    fn event(&mut self, event: RelayClientEvent<'_>, next: &mut Next) {
        match event {
            RelayClientEvent::Transform(heard) => self.heard(heard),
            RelayClientEvent::Welcome(id) => {
                if let Some(watch) = self.watch.as_ref() {
                    watch.plan_ids.set(watch.index, id);
                }
            }
            RelayClientEvent::Error(_) => self.counts.errors += 1,
            RelayClientEvent::Redirect(to) => {
                if matches!(next, Next::Go) {
                    *next = Next::Redirect(to);
                }
            }
            RelayClientEvent::Broken(err) => {
                tracing::warn!(%err, "load bot: what the relay sent did not read");
                self.counts.errors += 1;
                *next = Next::Ended;
            }
            _ => {}
        }
    }

    /// A transform, with its stamp if it brought one.
    fn heard(&mut self, heard: Heard<'_>) {
        let Some(peek) = heard.peek(stamp::FIELD) else {
            return;
        };
        let (player_id, stamp) = (peek.player_id, peek.field.and_then(Stamp::parse));
        let previous = self.stamps.get(&player_id).copied();
        if let (Some(s), Some((seq, _))) = (stamp, previous) {
            // An entry snapshot repeating the last or an older transform.
            if s.seq <= seq {
                return;
            }
        }
        self.counts.received += 1;
        if let Some(watch) = self.watch.as_mut() {
            watch.heard(player_id, peek.position, self.now_us);
        }
        let Some(Stamp { seq, sent_us }) = stamp else {
            if let Some((_, since)) = self.stamps.get_mut(&player_id) {
                *since += 1;
            }
            return;
        };
        self.stamps.insert(player_id, (seq, 0));
        // The first from a sender is not timed: it may be the zone-entry
        // snapshot, the sender's last transform however old it is, whose
        // age is not the relay's latency.
        if let Some((last, since)) = previous {
            // Walking, gaps are the relay's distance bands.
            if self.watch.is_none() {
                self.counts.lost += (seq - last).saturating_sub(since + 1);
            }
            self.histogram
                .record_micros(self.now_us.saturating_sub(sent_us));
        } else if self.watch.is_none() {
            // The first heard from this sender: the ones before it were
            // sent before this bot was in the zone.
            self.counts.before_joining += seq;
        }
    }
}

/// What a bot does after an event.
enum Next {
    Go,
    /// Its zone lives on another relay.
    Redirect(Redirect),
    Ended,
}
