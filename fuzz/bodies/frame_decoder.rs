//! Arbitrary bytes, cut into arbitrary chunks, into the frame decoder and the
//! envelope decoder. Any panic, or any allocation past the limits (libFuzzer's
//! -rss_limit_mb / -malloc_limit_mb), is a bug. Shared by the fuzz target and
//! the corpus replay test.

use bytes::{Bytes, BytesMut};
use switchboard::codec::{CodecConfig, FrameDecoder};
use switchboard::Message;

pub fn run(data: &[u8]) {
    // The first byte picks the chunk size, so splits are explored too.
    let Some((&chunk, wire)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk).max(1);
    let config = CodecConfig {
        max_frame_len: 64 * 1024,
        max_decompressed_len: 256 * 1024,
        ..CodecConfig::default()
    };
    let mut decoder = FrameDecoder::new(config);
    let mut buf = BytesMut::new();
    for piece in wire.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => {
                    assert!(frame.payload.len() <= 256 * 1024);
                    if let Ok(message) = Message::decode(frame.payload) {
                        let _ = message.content::<(String, Vec<u32>)>();
                    }
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    let _ = decoder.decode_eof(&mut buf);
    let _ = Message::decode(Bytes::copy_from_slice(wire));
}
