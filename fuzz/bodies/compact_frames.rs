//! Arbitrary `Compact` frames, one after another, into one client's
//! decoder (each frame as a little-endian u16 length and its bytes): read
//! or refused with an error, never a panic, and what it reads stays within
//! the format's limits. The same bytes go to a client's view decoder as
//! `CompactView` datagrams, and to the relay as a client's `ViewAck`s
//! (what it reads from a client's datagrams). Shared by the fuzz target and
//! the corpus replay test.

use std::sync::Arc;

use switchboard_relay::compact::{
    CompactDecoder, CompactRecord, Quantized, Versions, ViewAck, ViewDecoder, ViewEncoder,
};
use switchboard_relay::{Transform, MAX_EXTRA, MAX_ZONE};

fn within_limits(transform: &Transform) {
    assert!(transform.position.iter().all(|v| v.is_finite()));
    assert!(transform.rotation.iter().all(|a| (0.0..360.0).contains(a)));
    assert!(transform.zone.len() <= MAX_ZONE);
    assert!(transform.extra.len() <= MAX_EXTRA);
}

pub fn run(data: &[u8]) {
    let mut decoder = CompactDecoder::new();
    let mut view = ViewDecoder::new();
    // The relay's side: an encoder fed one transform a frame, told
    // whatever the bytes say was read, and a client that reads every
    // datagram it writes (so any acknowledgement the relay takes is true
    // of it): it must resolve every record.
    let mut encoder = ViewEncoder::new(0.01);
    let mut client = ViewDecoder::new();
    let mut versions = Versions::default();
    let walker = Arc::new(Transform::default());
    let mut rest = data;
    let mut tick = 0;
    while let [lo, hi, tail @ ..] = rest {
        let len = usize::from(u16::from_le_bytes([*lo, *hi])).min(tail.len());
        let (frame, next) = tail.split_at(len);
        rest = next;
        let read = decoder.read(frame, |record| {
            if let CompactRecord::Transform { transform, .. } = record {
                within_limits(transform);
            }
        });
        if read.is_err() {
            // A client closes the connection here; a new one starts afresh.
            decoder = CompactDecoder::new();
        }
        if view
            .read(frame, |record| within_limits(record.transform))
            .is_err()
        {
            view = ViewDecoder::new();
        }
        tick += 1;
        let quantized = Quantized::of(1, &walker, 0.01, &mut versions);
        encoder.transform(1, tick, &quantized, &walker);
        if let Some(ack) = ViewAck::read(frame) {
            encoder.ack(ack);
        }
        encoder.finish(tick, tick, |datagram| {
            let read = client.read(datagram, |record| within_limits(record.transform));
            assert!(read.is_ok_and(|frame| frame.is_some()));
        });
        assert_eq!(
            client.unresolved(),
            0,
            "a baseline the client does not hold"
        );
    }
}
