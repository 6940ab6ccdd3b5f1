//! Batches (`RelayOptions::batch`): for a native player who asked, what
//! the relay would have sent one by one waits here, and leaves as one
//! `Batch` frame when the pacer writes to that player: one frame header,
//! one length and one wake-up for a tick's transforms.

use std::collections::HashMap;

use bytes::Bytes;
use switchboard::message::EncodedMessage;
use switchboard::socket::{IdBuildHasher, PeerId, ServerHandle};

use crate::server::{RelayAction, RelayChannel};

/// The players who asked for batches, and what waits for each: (action,
/// content) of each message, the content shared by every recipient.
#[derive(Debug, Default)]
pub(super) struct Batches(HashMap<PeerId, Vec<(u16, Bytes)>, IdBuildHasher>);

impl Batches {
    /// `peer` asked for batches, or no longer.
    pub(super) fn set(&mut self, peer: PeerId, on: bool) {
        if on {
            self.0.entry(peer).or_default();
        } else {
            self.0.remove(&peer);
        }
    }

    /// `peer` is gone.
    pub(super) fn forget(&mut self, peer: PeerId) {
        self.0.remove(&peer);
    }

    /// Whether anyone asked (no content is encoded apart otherwise).
    pub(super) fn any(&self) -> bool {
        !self.0.is_empty()
    }

    /// Keeps the message for `peer` if it takes batches; `false` if not
    /// (the caller queues it as usual).
    pub(super) fn push(&mut self, peer: PeerId, action: u16, content: &Bytes) -> bool {
        match self.0.get_mut(&peer) {
            Some(waiting) => {
                waiting.push((action, content.clone()));
                true
            }
            None => false,
        }
    }

    /// Queues one `Batch` for each peer of `due` that has messages waiting
    /// (the pacer's flush writes it next).
    pub(super) fn queue(
        &mut self,
        due: &[PeerId],
        handle: &ServerHandle,
        tick: u64,
        server_time_ms: u64,
    ) {
        if self.0.is_empty() {
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
        for peer in due {
            let Some(waiting) = self.0.get_mut(peer) else {
                continue;
            };
            if waiting.is_empty() {
                continue;
            }
            // `Batch`'s layout, the contents borrowed: the same bytes as
            // `Vec<(u16, Vec<u8>)>`.
            let messages: Vec<(u16, &[u8])> =
                waiting.iter().map(|(a, c)| (*a, c.as_ref())).collect();
            let batch = (tick, server_time_ms, messages);
            match EncodedMessage::of(RelayChannel, RelayAction::Batch, &batch, codec) {
                Ok(encoded) => {
                    handle.queue_encoded_to_many([*peer], &encoded);
                }
                Err(err) => tracing::warn!(%err, "a batch could not be encoded"),
            }
            waiting.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::server::Batch;

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
