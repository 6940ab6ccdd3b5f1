//! Arbitrary `Compact` frames, one after another, into one client's
//! decoder (each frame as a little-endian u16 length and its bytes): read
//! or refused with an error, never a panic, and what it reads stays within
//! the format's limits. Shared by the fuzz target and the corpus replay test.

use switchboard_relay::compact::{CompactDecoder, CompactRecord};
use switchboard_relay::{MAX_EXTRA, MAX_ZONE};

pub fn run(data: &[u8]) {
    let mut decoder = CompactDecoder::new();
    let mut rest = data;
    while let [lo, hi, tail @ ..] = rest {
        let len = usize::from(u16::from_le_bytes([*lo, *hi])).min(tail.len());
        let (frame, next) = tail.split_at(len);
        rest = next;
        let read = decoder.read(frame, |record| {
            if let CompactRecord::Transform { transform, .. } = record {
                assert!(transform.position.iter().all(|v| v.is_finite()));
                assert!(transform.rotation.iter().all(|a| (0.0..360.0).contains(a)));
                assert!(transform.zone.len() <= MAX_ZONE);
                assert!(transform.extra.len() <= MAX_EXTRA);
            }
        });
        if read.is_err() {
            // A client closes the connection here; a new one starts afresh.
            decoder = CompactDecoder::new();
        }
    }
}
