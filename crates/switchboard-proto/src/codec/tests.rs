//! Unit tests of `codec`.

use super::*;

proptest::proptest! {
    /// The reader's fast path agrees with the decoder: whatever the
    /// bytes, when `peek_raw` says a whole uncompressed frame of `n`
    /// bytes starts the buffer, the decoder takes exactly that frame.
    #[test]
    fn peek_raw_agrees_with_decode(
        mut bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        len in 0u32..40,
        flags in 0u8..3,
        max in 1usize..48,
    ) {
        // Often a plausible header, sometimes garbage.
        if bytes.len() >= 5 && len % 3 != 0 {
            bytes[..4].copy_from_slice(&len.to_be_bytes());
            bytes[4] = flags;
        }
        let config = CodecConfig { max_frame_len: max, ..CodecConfig::default() };
        let mut decoder = FrameDecoder::new(config);
        let peeked = decoder.peek_raw(&bytes);
        let mut buf = BytesMut::from(&bytes[..]);
        let decoded = decoder.decode(&mut buf);
        if let Some(n) = peeked {
            let frame = decoded.expect("a frame peek_raw accepts decodes").expect("whole");
            proptest::prop_assert!(!frame.compressed);
            proptest::prop_assert_eq!(&frame.payload[..], &bytes[HEADER_LEN..n]);
            proptest::prop_assert_eq!(buf.len(), bytes.len() - n);
        }
    }
}

fn decode_all(bytes: &[u8], config: CodecConfig) -> Result<Vec<Frame>, FrameError> {
    let mut decoder = FrameDecoder::new(config);
    let mut buf = BytesMut::from(bytes);
    let mut frames = Vec::new();
    while let Some(frame) = decoder.decode_eof(&mut buf)? {
        frames.push(frame);
    }
    Ok(frames)
}

#[test]
fn small_payload_goes_raw() {
    let frame = encode_frame(b"hello", &CodecConfig::default()).unwrap();
    assert_eq!(&frame[..], b"\x00\x00\x00\x06\x00hello");
}

#[test]
fn large_repetitive_payload_is_compressed_and_round_trips() {
    let payload = vec![7u8; 10_000];
    let frame = encode_frame(&payload, &CodecConfig::default()).unwrap();
    assert_eq!(frame[4], FLAG_COMPRESSED);
    assert!(frame.len() < 200, "compressed to {} bytes", frame.len());
    let frames = decode_all(&frame, CodecConfig::default()).unwrap();
    assert_eq!(frames[0].payload, payload);
    assert!(frames[0].compressed);
}

#[test]
fn incompressible_payload_is_sent_raw() {
    // A xorshift sequence: zlib cannot shrink it.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let payload: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let frame = encode_frame(&payload, &CodecConfig::default()).unwrap();
    assert_eq!(frame[4], 0);
    assert_eq!(&frame[HEADER_LEN..], &payload[..]);
}

#[test]
fn in_place_matches_copying_encoder() {
    for len in [0, 10, 511, 512, 5000] {
        let payload = vec![3u8; len];
        let mut buf = vec![0u8; HEADER_LEN];
        buf.extend_from_slice(&payload);
        let config = CodecConfig::default();
        assert_eq!(
            encode_frame_in_place(buf, &config).unwrap(),
            encode_frame(&payload, &config).unwrap()
        );
    }
}

#[test]
fn oversized_outgoing_frame_is_refused() {
    let config = CodecConfig {
        max_frame_len: 100,
        compress_threshold: usize::MAX,
        ..CodecConfig::default()
    };
    let err = encode_frame(&[1u8; 200], &config).unwrap_err();
    assert!(matches!(err, FrameError::TooLarge { len: 201, max: 100 }));
}

#[test]
fn value_with_left_over_bytes_is_a_type_mismatch() {
    let bytes = encode_value(&(1u32, 2u32)).unwrap();
    let err = decode_value::<u32>(&bytes).unwrap_err();
    assert!(matches!(err, ContentError::LeftOver { .. }), "{err}");
}
