//! One bot of the load tester: connects, sends its stamped transforms,
//! and counts what it receives.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

use super::walk::{Checked, Ids, Walk};
use super::{open, Histogram, Plan, LIVE_RECEIVED, LIVE_SENT};
use crate::compact::{CompactDecoder, CompactRecord};
use crate::server::{Hello, RelayAction, RelayChannel};
use crate::stamp::{self, Heard, Stamp};
use crate::transform::Transform;
use switchboard::message::Message;
use switchboard::socket::{IdBuildHasher, SocketEvent};

/// Bot `index` of `plan`, until the test ends: its latencies go into its
/// group's `histogram`, its counts are returned.
pub(super) async fn run(plan: &Plan, index: usize, histogram: &Mutex<Histogram>) -> Counts {
    let mut counts = Counts::default();
    // Arrive in a stream, not all in one instant (the relay bounds
    // connections still in their handshake): 50 bots every 20 ms.
    tokio::time::sleep_until(plan.epoch + Duration::from_millis(20 * (index / 50) as u64)).await;
    let addr = plan.relay_of(index);
    let websocket = plan.websocket;
    let to = websocket.unwrap_or(addr);
    let reopen = || open(index, to, websocket.is_some(), plan.tls.as_ref());
    let Some(first) = reopen().await else {
        counts.disconnected = true;
        return counts;
    };
    // A relay busy with handshakes (many bots behind one address) asks
    // some to come back later: they do.
    let mut socket = match first.until_admitted(reopen, super::JOIN_ATTEMPTS).await {
        Ok(socket) => socket,
        Err(reason) => {
            tracing::warn!(bot = index, %reason, "load bot could not join");
            counts.disconnected = true;
            return counts;
        }
    };
    counts.connected = true;
    let hello = Hello {
        name: format!("load-{index}"),
        bot: true,
    };
    if let Ok(message) = Message::new(RelayChannel, RelayAction::Hello, &hello) {
        let _ = socket.send(&message);
    }
    ask_options(plan, &mut socket);
    let mut senders = Senders::default();
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
    let stop = tokio::time::sleep_until(end + Duration::from_millis(300));
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
                if socket.send_value(RelayChannel, RelayAction::Transform, &transform).is_ok() {
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
                    take_events(event, &mut socket, epoch, &mut counts, &mut senders, &mut histogram, &mut watch)
                };
                LIVE_RECEIVED.fetch_add(counts.received - received, Ordering::Relaxed);
                if let Next::Ended = next {
                    tracing::warn!(bot = index, "load bot disconnected");
                    counts.disconnected = true;
                    break;
                }
                if let Next::Redirect(to) = next {
                    // The zone lives on another relay: go there, keep the id.
                    let (next, ws) = match (&to.websocket, websocket.is_some()) {
                        (Some(ws), true) => (ws.parse(), true),
                        _ => (to.addr.parse(), false),
                    };
                    let next = match next {
                        Ok(next) => open(index, next, ws, plan.tls.as_ref()).await,
                        Err(_) => None,
                    };
                    let Some(next) = next else {
                        counts.disconnected = true;
                        break;
                    };
                    counts.wire_bytes += socket.handle().stats().bytes_in;
                    socket = next;
                    let _ = socket.send_value(RelayChannel, RelayAction::Handover, &to.ticket);
                    ask_options(plan, &mut socket);
                    // A new connection: a compact stream starts afresh.
                    senders.compact = CompactDecoder::new();
                    counts.handovers += 1;
                }
            }
        }
    }
    counts.wire_bytes += socket.handle().stats().bytes_in;
    socket.close("load test done");
    if let Some(watch) = watch {
        counts.checked = watch.checked;
    }
    counts
}

/// Takes in `first` and whatever else has arrived with it, on one reading
/// of the clock; stops at a redirect or the end of the connection.
fn take_events(
    first: Option<SocketEvent>,
    socket: &mut switchboard::socket::SocketStream,
    epoch: tokio::time::Instant,
    counts: &mut Counts,
    senders: &mut Senders,
    histogram: &mut Histogram,
    watch: &mut Option<Watch<'_>>,
) -> Next {
    let now_us = epoch.elapsed().as_micros() as u64;
    let mut event = first;
    loop {
        let Some(this) = event else {
            return Next::Ended;
        };
        match on_event(this, now_us, counts, senders, histogram, watch) {
            Next::Go => {}
            other => return other,
        }
        event = socket.try_next_event();
        if event.is_none() {
            return Next::Go;
        }
    }
}

/// One bot's counts.
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) sent: u64,
    pub(super) received: u64,
    pub(super) bytes: u64,
    /// Bytes its connections read off the wire (frames, handshake and
    /// keep-alives included).
    pub(super) wire_bytes: u64,
    pub(super) lost: u64,
    pub(super) errors: u64,
    pub(super) connected: bool,
    pub(super) disconnected: bool,
    pub(super) handovers: u64,
    /// What a walking bot's checks found.
    pub(super) checked: Checked,
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

/// Sends the relay the options the test asks for, if any.
fn ask_options(plan: &Plan, socket: &mut switchboard::socket::SocketStream) {
    if plan.options != crate::RelayOptions::default() {
        let _ = socket.send_value(RelayChannel, RelayAction::Options, &plan.options);
    }
}

/// What a bot holds of the others: each sender's last stamp's sequence
/// number and the transforms heard since it, and its connection's compact
/// stream.
#[derive(Default)]
struct Senders {
    stamps: HashMap<u32, (u64, u64), IdBuildHasher>,
    compact: CompactDecoder,
}

/// What a bot takes a relayed transform into.
struct Seen<'a, 'w> {
    now_us: u64,
    counts: &'a mut Counts,
    stamps: &'a mut HashMap<u32, (u64, u64), IdBuildHasher>,
    histogram: &'a mut Histogram,
    watch: &'a mut Option<Watch<'w>>,
}

impl Seen<'_, '_> {
    /// A relayed transform's content, alone or in a batch.
    fn relayed(&mut self, content: &[u8]) {
        if let Some(Heard {
            player_id,
            position,
            stamp,
        }) = stamp::read(content)
        {
            self.heard(player_id, position, stamp);
        }
    }

    /// A transform from `player_id` at `position`, with its stamp if it
    /// carries one.
    fn heard(&mut self, player_id: u32, position: [f32; 3], stamp: Option<Stamp>) {
        let previous = self.stamps.get(&player_id).copied();
        if let (Some(s), Some((seq, _))) = (stamp, previous) {
            // An entry snapshot repeating the last or an older transform.
            if s.seq <= seq {
                return;
            }
        }
        self.counts.received += 1;
        if let Some(watch) = self.watch.as_mut() {
            watch.heard(player_id, position, self.now_us);
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
            self.histogram.record(self.now_us.saturating_sub(sent_us));
        }
    }

    /// A `Compact` frame's content: its transforms, and its other messages
    /// as if they had come alone.
    fn compact(&mut self, decoder: &mut CompactDecoder, content: &[u8]) -> Next {
        let mut next = Next::Go;
        let read = decoder.read(content, |record| match record {
            CompactRecord::Transform {
                player_id,
                transform,
                extra_changed,
                ..
            } => {
                // Unknown fields that did not come with this record are
                // the ones held from before: its own carry no stamp.
                let stamp = extra_changed
                    .then(|| Stamp::of_extra(&transform.extra))
                    .flatten();
                self.heard(player_id, transform.position, stamp);
            }
            CompactRecord::Left { .. } => {}
            CompactRecord::Message { action, content } => {
                let message = Message::from_raw(
                    crate::server::RELAY_CHANNEL,
                    action,
                    bytes::Bytes::copy_from_slice(content),
                );
                if let Next::Go = next {
                    next = other_message(&message, self.counts, self.watch);
                }
            }
        });
        if let Err(err) = read {
            tracing::warn!(%err, "load bot: a compact frame");
            self.counts.errors += 1;
            return Next::Ended;
        }
        next
    }
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
    senders: &mut Senders,
    histogram: &mut Histogram,
    watch: &mut Option<Watch<'_>>,
) -> Next {
    match event {
        SocketEvent::Connected => counts.connected = true,
        SocketEvent::Received(message) => {
            counts.bytes += message.content_bytes().len() as u64 + 10;
            let action = message.action::<RelayAction>();
            if let Some(form @ (RelayAction::Relayed | RelayAction::Batch | RelayAction::Compact)) =
                action
            {
                let mut seen = Seen {
                    now_us,
                    counts,
                    stamps: &mut senders.stamps,
                    histogram,
                    watch,
                };
                let content = message.content_bytes();
                if form == RelayAction::Compact {
                    return seen.compact(&mut senders.compact, content);
                }
                if form == RelayAction::Relayed {
                    seen.relayed(content);
                } else if let Some(messages) = stamp::batch_messages(content) {
                    let relayed = switchboard::message::Action::id(RelayAction::Relayed);
                    for (_, content) in messages.filter(|(a, _)| *a == relayed) {
                        seen.relayed(content);
                    }
                }
                return Next::Go;
            }
            return other_message(&message, counts, watch);
        }
        SocketEvent::Error(_) => counts.errors += 1,
        SocketEvent::Disconnected(_) => return Next::Ended,
    }
    Next::Go
}

/// A relay message that is not a transform: a welcome, an error, a
/// redirect.
fn other_message(message: &Message, counts: &mut Counts, watch: &Option<Watch<'_>>) -> Next {
    match message.action::<RelayAction>() {
        Some(RelayAction::Welcome) => {
            if let (Some(watch), Ok(id)) = (watch.as_ref(), message.content::<u32>()) {
                watch.plan_ids.set(watch.index, id);
            }
        }
        Some(RelayAction::Error) => counts.errors += 1,
        Some(RelayAction::Redirect) => match message.content() {
            Ok(redirect) => return Next::Redirect(redirect),
            Err(_) => counts.errors += 1,
        },
        _ => {}
    }
    Next::Go
}
