//! Datagrams a peer sends a QUIC connection, as the receiver reads them
//! (`socket::quic::receive`): each decoded into its sequence and message,
//! the newest-wins rule applied per channel, the content read as a game
//! would. The first byte of each datagram is its length, so one input is a
//! run of datagrams. A panic, a framework channel let through, or more
//! channels remembered than `MAX_SEQUENCED_CHANNELS` is a bug. Shared by the
//! fuzz target and the corpus replay test.

use std::collections::BTreeSet;

use bytes::Bytes;
use switchboard_proto::connection::datagram::{self, Newest, MAX_SEQUENCED_CHANNELS};

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
        assert!(!message.is_framework(), "a framework channel as a datagram");
        let channel = message.channel_id();
        match newest.take(channel, sequence) {
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
