//! Datagrams a peer sends a QUIC connection, as the receiver reads them
//! (`socket::quic::receive`): each decoded into its sequence and message,
//! the newest-wins rule applied per channel (the relay's view as it comes), the content read as a game
//! would. The first byte of each datagram is its length, so one input is a
//! run of datagrams. A panic, a framework channel let through (but the relay's two), or more
//! channels remembered than `MAX_SEQUENCED_CHANNELS` is a bug. Shared by the
//! fuzz target and the corpus replay test.

use std::collections::BTreeSet;

use bytes::Bytes;
use switchboard_proto::connection::datagram::{
    self, Newest, FRAMEWORK_DATAGRAM_CHANNELS, MAX_SEQUENCED_CHANNELS,
};
use switchboard_proto::message::RELAY_VIEW_CHANNEL;

pub fn run(data: &[u8]) {
    let mut newest = Newest::default();
    let mut remembered = BTreeSet::new();
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let (one, after) = tail.split_at(usize::from(len).min(tail.len()));
        rest = after;
        let Ok((sequence, message)) = datagram::decode(Bytes::copy_from_slice(one)) else {
            continue;
        };
        let channel = message.channel_id();
        assert!(
            !message.is_framework() || FRAMEWORK_DATAGRAM_CHANNELS.contains(&channel),
            "a framework channel other than the relay's as a datagram"
        );
        match newest.take(channel, sequence) {
            // The relay's view is not sequenced: nothing remembered.
            Ok(_) if channel == RELAY_VIEW_CHANNEL => {}
            Ok(_) => {
                remembered.insert(channel);
            }
            Err(_) => assert!(
                !remembered.contains(&channel) && remembered.len() >= MAX_SEQUENCED_CHANNELS,
                "a known channel refused, or one refused with room left"
            ),
        }
        assert!(remembered.len() <= MAX_SEQUENCED_CHANNELS);
        let _ = message.content::<(String, Vec<u32>)>();
    }
}
