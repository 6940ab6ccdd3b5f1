//! The frame codec fed arbitrary messages in arbitrary chunk splits, and every
//! class of malformed input.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use switchboard::codec::{self, CodecConfig, FrameDecoder, FrameError};
use switchboard::Message;

/// Feeds `wire` to a fresh decoder in pieces cut at `cuts`, returning every
/// frame decoded.
fn decode_in_chunks(
    wire: &[u8],
    cuts: &[usize],
    config: CodecConfig,
) -> Result<Vec<Message>, String> {
    let mut decoder = FrameDecoder::new(config);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (wire.len() + 1)).collect();
    points.push(wire.len());
    points.sort_unstable();
    let mut start = 0;
    for end in points {
        buf.extend_from_slice(&wire[start..end]);
        start = end;
        while let Some(frame) = decoder.decode(&mut buf).map_err(|e| e.to_string())? {
            out.push(Message::decode(frame.payload).map_err(|e| e.to_string())?);
        }
    }
    if decoder
        .decode_eof(&mut buf)
        .map_err(|e| e.to_string())?
        .is_some()
    {
        return Err("frame left at eof".into());
    }
    Ok(out)
}

fn decode_one(wire: &[u8], config: CodecConfig) -> Result<codec::Frame, FrameError> {
    let mut decoder = FrameDecoder::new(config);
    let mut buf = BytesMut::from(wire);
    match decoder.decode_eof(&mut buf)? {
        Some(frame) => Ok(frame),
        None => panic!("no frame and no error"),
    }
}

fn zlib(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn frame(flags: u8, body: &[u8]) -> Vec<u8> {
    let mut wire = ((body.len() + 1) as u32).to_be_bytes().to_vec();
    wire.push(flags);
    wire.extend_from_slice(body);
    wire
}

fn arb_message() -> impl Strategy<Value = Message> {
    (
        any::<u16>(),
        any::<u16>(),
        prop_oneof![
            // Short random content: sent raw.
            proptest::collection::vec(any::<u8>(), 0..64),
            // Long repetitive content: compressed.
            (any::<u8>(), 512usize..20_000).prop_map(|(b, n)| vec![b; n]),
            // Long random content: offered to zlib, sent raw when it does not shrink.
            proptest::collection::vec(any::<u8>(), 512..4096),
        ],
    )
        .prop_map(|(channel, action, content)| {
            Message::from_raw(channel, action, Bytes::from(content))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn frames_round_trip_in_any_chunk_split(
        messages in proptest::collection::vec(arb_message(), 1..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let config = CodecConfig::default();
        let mut wire = Vec::new();
        for message in &messages {
            wire.extend_from_slice(message.encode(&config).unwrap().as_bytes());
        }
        let decoded = decode_in_chunks(&wire, &cuts, config).unwrap();
        prop_assert_eq!(decoded, messages);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(
        wire in proptest::collection::vec(any::<u8>(), 0..2048),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let config = CodecConfig { max_frame_len: 1024, max_decompressed_len: 4096, ..CodecConfig::default() };
        let _ = decode_in_chunks(&wire, &cuts, config);
    }

    #[test]
    fn arbitrary_content_never_panics_typed_decoding(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let message = Message::from_raw(1, 1, Bytes::from(bytes));
        let _ = message.content::<(String, Vec<u64>, Option<u32>)>();
        let _ = message.content::<std::collections::HashMap<String, Vec<u8>>>();
    }
}

#[test]
fn read_incomplete_head_waits_for_more() {
    let mut decoder = FrameDecoder::default();
    let mut buf = BytesMut::from(&[0u8, 0, 0][..]);
    assert!(decoder.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(&[3, 0, 7]);
    assert!(decoder.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(&[8]);
    let frame = decoder.decode(&mut buf).unwrap().unwrap();
    assert_eq!(&frame.payload[..], &[7, 8]);
}

#[test]
fn truncated_frame_at_eof_is_an_error() {
    let err = decode_one(&[0, 0, 0, 9, 0, 1, 2], CodecConfig::default()).unwrap_err();
    assert!(
        matches!(err, FrameError::Truncated { buffered: 7 }),
        "{err}"
    );
}

#[test]
fn read_max_frame_len_refuses_before_buffering() {
    let config = CodecConfig {
        max_frame_len: 100,
        ..CodecConfig::default()
    };
    let mut decoder = FrameDecoder::new(config);
    let mut buf = BytesMut::from(&[0u8, 0, 0, 101][..]);
    let err = decoder.decode(&mut buf).unwrap_err();
    assert!(
        matches!(err, FrameError::TooLarge { len: 101, max: 100 }),
        "{err}"
    );
    assert!(
        buf.capacity() < 101,
        "nothing was reserved for the refused frame"
    );
    // Exactly at the limit is fine.
    let ok = frame(0, &[0u8; 99]);
    assert!(decode_one(
        &ok,
        CodecConfig {
            max_frame_len: 100,
            ..CodecConfig::default()
        }
    )
    .is_ok());
}

#[test]
fn zero_length_is_an_error() {
    assert!(matches!(
        decode_one(&[0, 0, 0, 0], CodecConfig::default()),
        Err(FrameError::Empty)
    ));
}

#[test]
fn unknown_flag_bits_are_an_error() {
    for flags in [0b10, 0b100, 0b1000_0001] {
        let err = decode_one(&frame(flags, b"x"), CodecConfig::default()).unwrap_err();
        assert!(
            matches!(err, FrameError::UnknownFlags(f) if f == flags),
            "{err}"
        );
    }
}

#[test]
fn corrupt_zlib_is_an_error() {
    let err = decode_one(&frame(1, b"not zlib at all"), CodecConfig::default()).unwrap_err();
    assert!(matches!(err, FrameError::CorruptZlib(_)), "{err}");
}

#[test]
fn truncated_zlib_is_an_error() {
    let body = zlib(&vec![42u8; 10_000]);
    let err = decode_one(&frame(1, &body[..body.len() / 2]), CodecConfig::default()).unwrap_err();
    assert!(matches!(err, FrameError::TruncatedZlib), "{err}");
}

#[test]
fn zlib_bomb_stops_at_the_limit() {
    let body = zlib(&vec![0u8; 64 * 1024 * 1024]);
    let config = CodecConfig {
        max_decompressed_len: 1024 * 1024,
        ..CodecConfig::default()
    };
    let err = decode_one(&frame(1, &body), config).unwrap_err();
    assert!(
        matches!(err, FrameError::DecompressedTooLarge { max: 1048576 }),
        "{err}"
    );
}

#[test]
fn payload_exactly_at_the_inflate_limit_is_accepted() {
    let body = zlib(&vec![5u8; 4096]);
    let config = CodecConfig {
        max_decompressed_len: 4096,
        ..CodecConfig::default()
    };
    assert_eq!(
        decode_one(&frame(1, &body), config.clone())
            .unwrap()
            .payload
            .len(),
        4096
    );
    let body = zlib(&vec![5u8; 4097]);
    assert!(matches!(
        decode_one(&frame(1, &body), config),
        Err(FrameError::DecompressedTooLarge { .. })
    ));
}

#[test]
fn trailing_bytes_after_zlib_stream_are_an_error() {
    let mut body = zlib(b"hello hello hello");
    body.extend_from_slice(&[1, 2, 3]);
    let err = decode_one(&frame(1, &body), CodecConfig::default()).unwrap_err();
    assert!(
        matches!(err, FrameError::TrailingBytes { count: 3 }),
        "{err}"
    );
}

#[test]
fn garbage_bincode_envelope_is_an_error() {
    for garbage in [&[][..], &[0xfc, 1, 2, 3, 4][..], &[0xff][..], &[7][..]] {
        assert!(
            Message::decode(Bytes::copy_from_slice(garbage)).is_err(),
            "{garbage:?}"
        );
    }
}

#[test]
fn content_claiming_a_huge_vec_is_refused_without_allocating() {
    // varint 0xfd announces a u64 length: 2^60 elements of u64.
    let mut bytes = vec![0xfd];
    bytes.extend_from_slice(&(1u64 << 60).to_le_bytes());
    let message = Message::from_raw(1, 1, Bytes::from(bytes));
    assert!(message.content::<Vec<u64>>().is_err());
}

#[test]
fn compression_is_skipped_when_it_does_not_pay() {
    let config = CodecConfig::default();
    let small = Message::from_raw(1, 1, Bytes::from(vec![0u8; 100]))
        .encode(&config)
        .unwrap();
    assert_eq!(small.as_bytes()[4], 0, "under the threshold: raw");
    let big = Message::from_raw(1, 1, Bytes::from(vec![0u8; 5000]))
        .encode(&config)
        .unwrap();
    assert_eq!(big.as_bytes()[4], 1, "compressible: compressed");
    assert!(big.wire_len() < 100);
}
