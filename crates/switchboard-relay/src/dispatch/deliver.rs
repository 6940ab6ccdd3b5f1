//! One event to its recipients: encoded once per kind of link, queued
//! for native players (or kept in their batches), written as a shared line
//! for JSON players.

use std::collections::HashMap;

use serde_json::json;
use switchboard::message::EncodedMessage;
use switchboard::socket::{EndpointHandle, IdBuildHasher, PeerId};

use super::{batch, Route};
use crate::hub::RelayEvent;
use crate::json::json_line_of;
use crate::server::RelayChannel;

/// Encodes an event once per kind of link, then hands it to every
/// recipient: native ones are queued (for the pacer to flush), JSON ones get
/// the shared line. Returns the JSON recipients too far behind to take it
/// (slow consumers, to be dropped), the native ones it was queued for, and
/// how many recipients it had.
pub(super) fn deliver(
    routes: &HashMap<u32, Route, IdBuildHasher>,
    native: &EndpointHandle,
    batches: &mut batch::Batches,
    to: &[u32],
    event: &RelayEvent,
) -> (Vec<u32>, Vec<PeerId>, usize) {
    let codec = &native.config().socket.codec;
    // The forms players who take batches need, each made once.
    let mut forms = batches.any().then(|| batches.forms(event));
    let encoded = plain_frame(event, codec);
    let mut json_line = None;
    let mut slow = Vec::new();
    let mut native_peers = Vec::new();
    // Those who take single frames, when some take batches.
    let mut plain_peers = Vec::new();
    for id in to {
        match routes.get(id) {
            Some(Route::Native(peer)) => {
                native_peers.push(*peer);
                if let Some(forms) = &mut forms {
                    if !batches.push(*peer, forms) {
                        plain_peers.push(*peer);
                    }
                }
            }
            Some(Route::Json { lines, .. }) => {
                // Encoded once, shared by every JSON recipient.
                let line = json_line.get_or_insert_with(|| {
                    let value = match event {
                        RelayEvent::Welcome { player_id } => {
                            json!({"type": "welcome", "playerId": player_id})
                        }
                        RelayEvent::Left { player_id } => {
                            json!({"type": "disconnect", "playerId": player_id})
                        }
                        RelayEvent::Transform {
                            player_id,
                            server_time_ms,
                            transform,
                        } => transform.to_json(*player_id, *server_time_ms),
                    };
                    json_line_of(value.to_string())
                });
                if !lines.push(line) {
                    slow.push(*id);
                }
            }
            None => {}
        }
    }
    match &encoded {
        Some(encoded) if forms.is_some() => {
            native.queue_encoded_to_many(plain_peers, encoded);
        }
        Some(encoded) => {
            native.queue_encoded_to_many(native_peers.iter().copied(), encoded);
        }
        None => native_peers.clear(),
    }
    (slow, native_peers, to.len())
}

/// An event as the frame a client that takes single messages gets.
pub(crate) fn plain_frame(
    event: &RelayEvent,
    codec: &switchboard::codec::CodecConfig,
) -> Option<EncodedMessage> {
    let plain = batch::Plain::of(event);
    EncodedMessage::of(RelayChannel, plain.action(), &plain, codec).ok()
}
