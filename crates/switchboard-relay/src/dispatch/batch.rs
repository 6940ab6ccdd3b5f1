//! Batches (`RelayOptions::batch`, `RelayOptions::compact`): for a native
//! player who asked, what the relay would have sent one by one waits here,
//! and leaves as one `Batch` (or `Compact`) frame when the pacer writes to
//! that player: one frame header, one length and one wake-up for a tick's
//! transforms; with `compact`, each transform a few bytes.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use switchboard::message::{Action, EncodedMessage};
use switchboard::socket::{CloseCode, EndpointHandle, IdBuildHasher, PeerId};

use crate::compact::{CompactEncoder, Quantized, Versions, ViewAck, ViewEncoder};
use crate::hub::RelayEvent;
use crate::server::{RelayAction, RelayChannel, RelayOptions};
use crate::transform::Transform;

/// What waits for one player.
#[derive(Debug)]
enum Waiting {
    /// Messages one by one, as they would have gone alone.
    Plain(Held),
    /// Compact records, and the baselines they are written against.
    Compact(Box<CompactEncoder>),
    /// Others' transforms as compact view datagrams, the rest in batches
    /// on the stream (`RelayOptions::compact_datagrams`).
    View(Box<ViewEncoder>, Held),
}

/// A plain batch waiting: (action, content) of each message, the content
/// shared by every recipient.
#[derive(Debug, Default)]
struct Held {
    messages: Vec<(u16, Bytes)>,
    /// Others' transforms, apart, for a player who takes them as datagrams
    /// (`None`: they wait in `messages` with the rest).
    view: Option<Vec<(u16, Bytes)>>,
    bytes: usize,
}

/// The content bytes of others' transforms one `RELAY_VIEW_CHANNEL` batch
/// carries: with its head and QUIC's, within the 1,200 bytes every QUIC path
/// takes. A single transform past it still goes alone (on the stream, if
/// no datagram holds it).
const VIEW_BATCH_BYTES: usize = 1_000;

/// The players who asked for batches, and what waits for each.
#[derive(Debug)]
pub(super) struct Batches {
    /// Compact streams' precision (`RelayConfig::compact_precision`).
    precision: f32,
    waiting: HashMap<PeerId, Waiting, IdBuildHasher>,
    /// A `Compact` frame's content, built here and reused.
    scratch: Vec<u8>,
    /// Each sender's versions of its zone and unknown fields, for the
    /// compact streams.
    versions: Versions,
    /// Peers whose batch passed [`SPLIT_AT`]: it leaves at once, not at
    /// the tick, so no frame nears the peer's frame limit.
    full: Vec<PeerId>,
}

/// The bytes a batch holds before it leaves without waiting for its tick.
const SPLIT_AT: usize = 32 * 1024;

/// An event's forms for the players who take batches: each made once, the
/// first time a recipient needs it.
pub(super) struct Forms<'e> {
    event: &'e RelayEvent,
    precision: f32,
    plain: Option<Option<(u16, Bytes)>>,
    quantized: Option<Quantized>,
}

/// An event as a relay message alone carries it: its action and its
/// content (`Relayed`'s fields with the transform borrowed, not cloned).
pub(super) enum Plain<'e> {
    /// `Welcome` or `Left`: a player id.
    Id(RelayAction, u32),
    /// `Relayed`.
    Relayed(u32, u64, &'e crate::transform::Transform),
}

impl<'e> Plain<'e> {
    pub(super) fn of(event: &'e RelayEvent) -> Plain<'e> {
        match event {
            RelayEvent::Welcome { player_id } => Plain::Id(RelayAction::Welcome, *player_id),
            RelayEvent::Left { player_id } => Plain::Id(RelayAction::Left, *player_id),
            RelayEvent::Transform {
                player_id,
                server_time_ms,
                transform,
            } => Plain::Relayed(*player_id, *server_time_ms, transform),
        }
    }

    pub(super) fn action(&self) -> RelayAction {
        match self {
            Plain::Id(action, _) => *action,
            Plain::Relayed(..) => RelayAction::Relayed,
        }
    }
}

impl serde::Serialize for Plain<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Plain::Id(_, id) => id.serialize(s),
            Plain::Relayed(id, time, transform) => (id, time, transform).serialize(s),
        }
    }
}

impl<'e> Forms<'e> {
    /// The event as (action, content), as it would have come alone.
    fn plain(&mut self) -> Option<&(u16, Bytes)> {
        let event = self.event;
        self.plain
            .get_or_insert_with(|| {
                let plain = Plain::of(event);
                let bytes = switchboard::codec::encode_value(&plain).ok()?;
                Some((plain.action().id(), Bytes::from(bytes)))
            })
            .as_ref()
    }

    /// The event's transform, quantized once for all its compact
    /// recipients; `None` for another event.
    fn quantized(
        &mut self,
        versions: &mut Versions,
    ) -> Option<(u32, u64, &Quantized, &'e Arc<Transform>)> {
        let RelayEvent::Transform {
            player_id,
            server_time_ms,
            transform,
        } = self.event
        else {
            return None;
        };
        let precision = self.precision;
        let quantized = self
            .quantized
            .get_or_insert_with(|| Quantized::of(*player_id, transform, precision, versions));
        Some((*player_id, *server_time_ms, quantized, transform))
    }

    /// Writes the event into a compact view: a transform into its
    /// datagrams, anything else into `held` for the stream.
    fn view(&mut self, view: &mut ViewEncoder, held: &mut Held, versions: &mut Versions) {
        if let Some((id, stamp, quantized, transform)) = self.quantized(versions) {
            return view.transform(id, stamp, quantized, transform);
        }
        if let RelayEvent::Left { player_id } = self.event {
            view.left(*player_id);
        }
        if let Some((action, content)) = self.plain() {
            held.bytes += content.len();
            held.messages.push((*action, content.clone()));
        }
    }

    /// Writes the event into a compact stream.
    fn compact(&mut self, encoder: &mut CompactEncoder, versions: &mut Versions) {
        if let Some((id, stamp, quantized, transform)) = self.quantized(versions) {
            return encoder.transform(id, stamp, quantized, transform);
        }
        match self.event {
            RelayEvent::Transform { .. } => {}
            RelayEvent::Left { player_id } => encoder.left(*player_id),
            RelayEvent::Welcome { .. } => {
                if let Some((action, content)) = self.plain() {
                    encoder.message(*action, content);
                }
            }
        }
    }
}

impl Batches {
    /// No one's batches yet; compact streams quantize to `precision`.
    pub(super) fn new(precision: f32) -> Batches {
        Batches {
            precision,
            waiting: HashMap::default(),
            scratch: Vec::new(),
            versions: Versions::default(),
            full: Vec::new(),
        }
    }

    /// The forms of `event` its recipients who take batches need, each to
    /// be made once.
    pub(super) fn forms<'e>(&self, event: &'e RelayEvent) -> Forms<'e> {
        Forms {
            event,
            precision: self.precision,
            plain: None,
            quantized: None,
        }
    }

    /// `peer` asked for `options`: batches, compact ones, compact view
    /// datagrams, or neither. A compact stream or view already running goes
    /// on (its baselines are the client's); one turned off or on starts
    /// afresh.
    pub(super) fn set(&mut self, peer: PeerId, options: RelayOptions) {
        if options.compact_datagrams {
            if !matches!(self.waiting.get(&peer), Some(Waiting::View(..))) {
                let view = Box::new(ViewEncoder::new(self.precision));
                self.waiting
                    .insert(peer, Waiting::View(view, Held::default()));
            }
            return;
        }
        // Datagrams come in batches.
        let batch = options.batch || options.datagrams;
        match (self.waiting.get(&peer), options.compact, batch) {
            (Some(Waiting::Compact(_)), true, _) => {}
            (_, true, _) => {
                let encoder = Box::new(CompactEncoder::new(self.precision));
                self.waiting.insert(peer, Waiting::Compact(encoder));
            }
            (Some(Waiting::Plain(held)), false, true)
                if held.view.is_some() == options.datagrams => {}
            (_, false, true) => {
                let view = options.datagrams.then(Vec::new);
                let held = Held {
                    view,
                    ..Held::default()
                };
                self.waiting.insert(peer, Waiting::Plain(held));
            }
            (_, false, false) => {
                self.waiting.remove(&peer);
            }
        }
    }

    /// `peer` says which view datagrams it read.
    pub(super) fn ack(&mut self, peer: PeerId, ack: ViewAck) {
        if let Some(Waiting::View(view, _)) = self.waiting.get_mut(&peer) {
            view.ack(ack);
        }
    }

    /// Whether `peer` takes compact transforms.
    pub(super) fn is_compact(&self, peer: PeerId) -> bool {
        matches!(self.waiting.get(&peer), Some(Waiting::Compact(_)))
    }

    /// `peer` left its zone: its compact stream says it left everyone it
    /// held. How many that was.
    pub(super) fn left_everyone(&mut self, peer: PeerId) -> usize {
        match self.waiting.get_mut(&peer) {
            Some(Waiting::Compact(encoder)) => {
                let held = encoder.senders();
                encoder.left_everyone();
                held
            }
            _ => 0,
        }
    }

    /// `peer` is gone.
    pub(super) fn forget(&mut self, peer: PeerId) {
        self.waiting.remove(&peer);
    }

    /// Player `id` left the relay: its versions go.
    pub(super) fn forget_player(&mut self, id: u32) {
        self.versions.forget(id);
    }

    /// Whether anyone asked (no content is encoded apart otherwise).
    pub(super) fn any(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Keeps the event for `peer` if it takes batches; `false` if not
    /// (the caller queues it as usual).
    pub(super) fn push(&mut self, peer: PeerId, forms: &mut Forms<'_>) -> bool {
        let held = match self.waiting.get_mut(&peer) {
            Some(Waiting::Plain(held)) => {
                if let Some((action, content)) = forms.plain() {
                    let to = match &mut held.view {
                        Some(view) if *action == RelayAction::Relayed.id() => view,
                        _ => &mut held.messages,
                    };
                    to.push((*action, content.clone()));
                    held.bytes += content.len();
                }
                held.bytes
            }
            Some(Waiting::Compact(encoder)) => {
                forms.compact(encoder, &mut self.versions);
                encoder.len()
            }
            Some(Waiting::View(view, held)) => {
                forms.view(view, held, &mut self.versions);
                view.len() + held.bytes
            }
            None => return false,
        };
        if held >= SPLIT_AT && !self.full.contains(&peer) {
            self.full.push(peer);
        }
        true
    }

    /// The peers whose batch should leave now, not at the tick.
    pub(super) fn take_full(&mut self) -> Vec<PeerId> {
        std::mem::take(&mut self.full)
    }

    /// Queues one `Batch` or `Compact` frame for each peer of `due` that
    /// has messages waiting (the pacer's flush writes it next).
    pub(super) fn queue(
        &mut self,
        due: &[PeerId],
        handle: &EndpointHandle,
        tick: u64,
        server_time_ms: u64,
    ) {
        if self.waiting.is_empty() {
            return;
        }
        // Not offered to zlib: a tick's transforms are floats and stamps
        // that level 1 barely shrinks, and trying costs more CPU than the
        // frame headers the batch saves (measured: docs/PERFORMANCE.md).
        let codec = switchboard::codec::CodecConfig {
            compress_threshold: usize::MAX,
            ..handle.config().socket.codec.clone()
        };
        let codec = &codec;
        let stamp = (tick, server_time_ms);
        for peer in due {
            let encoded = match self.waiting.get_mut(peer) {
                Some(Waiting::Plain(held)) => {
                    held.bytes = 0;
                    if let Some(view) = &mut held.view {
                        queue_view(handle, *peer, stamp, view, codec);
                    }
                    if held.messages.is_empty() {
                        continue;
                    }
                    let encoded = batch_of(RelayChannel, stamp, &held.messages, codec);
                    held.messages.clear();
                    encoded
                }
                Some(Waiting::View(view, held)) => {
                    view.finish(tick, server_time_ms, |content| {
                        let channel = crate::server::RelayViewChannel;
                        let action = RelayAction::CompactView;
                        // Records of transforms within the relay's limits:
                        // they encode (one that did not is lost, as a
                        // datagram may be).
                        if let Ok(encoded) = EncodedMessage::raw(channel, action, content, codec) {
                            handle.queue_encoded_to_many([*peer], &encoded);
                        }
                    });
                    held.bytes = 0;
                    if held.messages.is_empty() {
                        continue;
                    }
                    let encoded = batch_of(RelayChannel, stamp, &held.messages, codec);
                    held.messages.clear();
                    encoded
                }
                Some(Waiting::Compact(encoder)) if !encoder.is_empty() => {
                    self.scratch.clear();
                    encoder.finish(tick, server_time_ms, &mut self.scratch);
                    EncodedMessage::raw(RelayChannel, RelayAction::Compact, &self.scratch, codec)
                }
                _ => continue,
            };
            match encoded {
                Ok(encoded) => {
                    handle.queue_encoded_to_many([*peer], &encoded);
                }
                Err(err) => {
                    // Its stream cannot go on without what was lost: the
                    // player reconnects and starts afresh.
                    tracing::warn!(%err, "a batch could not be encoded");
                    self.waiting.remove(peer);
                    let why = format!("a batch could not be encoded: {err}");
                    handle.close_peer_with(*peer, CloseCode::GOING_AWAY, &why);
                }
            }
        }
    }
}

/// One `Batch` of `messages` on `channel`, stamped with the tick and the
/// time: `Batch`'s layout with the contents borrowed (the same bytes as
/// `Vec<(u16, Vec<u8>)>`).
fn batch_of<C: switchboard::Channel>(
    channel: C,
    (tick, server_time_ms): (u64, u64),
    messages: &[(u16, Bytes)],
    codec: &switchboard::codec::CodecConfig,
) -> Result<EncodedMessage, switchboard::socket::SendError> {
    let messages: Vec<(u16, &[u8])> = messages.iter().map(|(a, c)| (*a, c.as_ref())).collect();
    EncodedMessage::of(
        channel,
        RelayAction::Batch,
        &(tick, server_time_ms, messages),
        codec,
    )
}

/// Others' transforms waiting for a datagram player, as `Batch`es on
/// `RELAY_VIEW_CHANNEL` of at most [`VIEW_BATCH_BYTES`] of contents each, so
/// that each fits a datagram (a lost one loses only its own).
fn queue_view(
    handle: &EndpointHandle,
    peer: PeerId,
    stamp: (u64, u64),
    view: &mut Vec<(u16, Bytes)>,
    codec: &switchboard::codec::CodecConfig,
) {
    let mut start = 0;
    while start < view.len() {
        let mut end = start + 1;
        let mut bytes = view[start].1.len();
        while end < view.len() && bytes + view[end].1.len() <= VIEW_BATCH_BYTES {
            bytes += view[end].1.len();
            end += 1;
        }
        // A transform is within the relay's limits, so it encodes; one
        // that did not is the sender's loss, as a lost datagram is.
        if let Ok(encoded) = batch_of(
            crate::server::RelayViewChannel,
            stamp,
            &view[start..end],
            codec,
        ) {
            handle.queue_encoded_to_many([peer], &encoded);
        }
        start = end;
    }
    view.clear();
}

#[cfg(test)]
mod tests {
    use crate::server::Batch;

    #[test]
    fn a_view_batch_as_a_datagram_is_the_vector_of_protocol_md() {
        let codec = switchboard::codec::CodecConfig::default();
        let view = vec![(4u16, bytes::Bytes::from_static(&[1, 2, 3]))];
        let encoded = super::batch_of(crate::server::RelayViewChannel, (7, 350), &view, &codec);
        let frame = encoded.unwrap().as_bytes().clone();
        let payload = frame.slice(switchboard::codec::HEADER_LEN..);
        let message = switchboard::Message::decode(payload).unwrap();
        let datagram = switchboard::socket::quic::datagram::encode(0, &message);
        assert_eq!(
            &datagram[..],
            &[0, 0, 0, 0, 5, 11, 7, 0xfb, 0x5e, 1, 1, 4, 3, 1, 2, 3]
        );
    }

    #[test]
    fn a_batch_of_borrowed_contents_reads_back_as_the_batch_type() {
        let contents: [&[u8]; 2] = [b"one", b""];
        let messages: Vec<(u16, &[u8])> = vec![(4, contents[0]), (5, contents[1])];
        let bytes = switchboard::codec::encode_value(&(7u64, 350u64, messages)).unwrap();
        let batch: Batch = switchboard::codec::decode_value(&bytes).unwrap();
        assert_eq!(
            batch,
            Batch {
                tick: 7,
                server_time_ms: 350,
                messages: vec![(4, b"one".to_vec()), (5, Vec::new())],
            }
        );
    }
}
