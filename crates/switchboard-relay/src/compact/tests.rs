use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::transform::{MovementState, Transform};

/// What a client makes of a frame: (player, stamp, transform) for each
/// transform, `Left` as (player, 0, None), messages by action.
#[derive(Debug, PartialEq)]
enum Got {
    Moved(u32, u64, Transform, bool),
    Left(u32),
    Message(u16, Vec<u8>),
}

fn read(decoder: &mut CompactDecoder, content: &[u8]) -> Vec<Got> {
    let mut got = Vec::new();
    decoder
        .read(content, |record| {
            got.push(match record {
                CompactRecord::Transform {
                    player_id,
                    server_time_ms,
                    transform,
                    extra_changed,
                } => Got::Moved(player_id, server_time_ms, transform.clone(), extra_changed),
                CompactRecord::Left { player_id } => Got::Left(player_id),
                CompactRecord::Message { action, content } => {
                    Got::Message(action, content.to_vec())
                }
            })
        })
        .unwrap();
    got
}

fn frame(encoder: &mut CompactEncoder, tick: u64) -> Vec<u8> {
    let mut out = Vec::new();
    encoder.finish(tick, 0, &mut out);
    out
}

fn walker(x: f32, z: f32) -> Arc<Transform> {
    Arc::new(Transform {
        position: [x, 0.0, z],
        rotation: [0.0, 90.0, 0.0],
        zone: "field".into(),
        ..Transform::default()
    })
}

fn send(encoder: &mut CompactEncoder, player: u32, stamp: u64, t: &Arc<Transform>) {
    // One relay's versions, shared by the tests' encoders (as the relay's
    // are by its clients'), in this thread.
    thread_local!(static VERSIONS: std::cell::RefCell<Versions> = Default::default());
    let precision = encoder.precision();
    let quantized = VERSIONS.with(|v| Quantized::of(player, t, precision, &mut v.borrow_mut()));
    encoder.transform(player, stamp, &quantized, t);
}

#[test]
fn a_walking_players_step_is_six_bytes_and_reads_back_to_the_centimetre() {
    let mut encoder = CompactEncoder::new(DEFAULT_PRECISION);
    let mut decoder = CompactDecoder::new();
    let first = walker(10.0, 20.0);
    send(&mut encoder, 70_000, 1_000, &first);
    let got = read(&mut decoder, &frame(&mut encoder, 1));
    assert_eq!(got, vec![Got::Moved(70_000, 1_000, (*first).clone(), true)]);
    // 5 m/s at 10 Hz: 50 cm a step, two senders a frame.
    let mut steps = 0;
    let mut bytes = 0;
    for i in 1..=50u64 {
        let t = walker(10.0 + 0.5 * i as f32, 20.0 - 0.123 * i as f32);
        let other = walker(-3.0, 0.25 * i as f32);
        send(&mut encoder, 70_000, 1_000 + 100 * i, &t);
        send(&mut encoder, 9, 1_000 + 100 * i + 3, &other);
        let content = frame(&mut encoder, 1 + i);
        bytes += content.len();
        steps += 2;
        for got in read(&mut decoder, &content) {
            let Got::Moved(player, stamp, transform, _) = got else {
                panic!("{got:?}");
            };
            let sent = if player == 9 { &other } else { &t };
            let expected_stamp = 1_000 + 100 * i + if player == 9 { 3 } else { 0 };
            assert_eq!(stamp, expected_stamp);
            for (a, b) in transform.position.iter().zip(sent.position) {
                assert!((a - b).abs() <= 0.005 + 1e-4, "{a} {b}");
            }
            assert_eq!(transform.rotation, [0.0, 90.0, 0.0]);
            assert_eq!(transform.zone, "field");
        }
    }
    // Per step: head, slot, time, three differences (the second sender's
    // entry is in the first frames); per frame a tick and a time of up to
    // three bytes each.
    let per_step = bytes as f64 / steps as f64;
    assert!(per_step < 10.0, "{per_step} bytes a step");
}

#[test]
fn only_what_changed_travels_and_the_decoder_keeps_the_rest() {
    let mut encoder = CompactEncoder::new(DEFAULT_PRECISION);
    let mut decoder = CompactDecoder::new();
    let mut t = Transform {
        position: [1.0, 2.0, 3.0],
        rotation: [10.0, -90.0, 370.0],
        zone: "hall".into(),
        state: Some(MovementState {
            moving: true,
            weapon_drawn: true,
            speed: 4.25,
            ..MovementState::default()
        }),
        extra: BTreeMap::from([("emote".into(), "\"wave\"".into())]),
    };
    send(&mut encoder, 1, 5, &Arc::new(t.clone()));
    let got = read(&mut decoder, &frame(&mut encoder, 0));
    let Got::Moved(1, 5, first, true) = &got[0] else {
        panic!("{got:?}");
    };
    // Angles come back in [0, 360), to a third of a degree or finer.
    let rotation = first.rotation;
    for (a, b) in rotation.iter().zip([10.0, 270.0, 10.0]) {
        assert!((a - b).abs() < 0.36, "{rotation:?}");
    }
    assert_eq!(first.state, t.state);
    assert_eq!(first.extra, t.extra);
    // Standing still, nothing else changed: head, slot, time.
    send(&mut encoder, 1, 6, &Arc::new(t.clone()));
    let content = frame(&mut encoder, 0);
    assert_eq!(content.len(), 2 + 3, "{content:?}");
    let got = read(&mut decoder, &content);
    assert!(matches!(&got[0], Got::Moved(1, 6, same, false) if same == first));
    // Each field alone.
    t.state = None;
    t.zone = "yard".into();
    t.extra.clear();
    send(&mut encoder, 1, 7, &Arc::new(t.clone()));
    let got = read(&mut decoder, &frame(&mut encoder, 0));
    let Got::Moved(1, 7, now, true) = &got[0] else {
        panic!("{got:?}");
    };
    assert_eq!((now.state.as_ref(), now.zone.as_str()), (None, "yard"));
    assert!(now.extra.is_empty());
    assert_eq!(now.rotation, first.rotation);
}

#[test]
fn slots_are_given_on_entry_freed_on_leaving_and_reused() {
    let mut encoder = CompactEncoder::new(DEFAULT_PRECISION);
    let mut decoder = CompactDecoder::new();
    send(&mut encoder, 100, 1, &walker(0.0, 0.0));
    send(&mut encoder, 200, 1, &walker(1.0, 0.0));
    encoder.left(100);
    // Someone this client never had: a plain `Left` message.
    encoder.left(300);
    encoder.message(3, &[42]);
    let got = read(&mut decoder, &frame(&mut encoder, 0));
    assert!(matches!(got[0], Got::Moved(100, ..)));
    assert!(matches!(got[1], Got::Moved(200, ..)));
    assert_eq!(got[2], Got::Left(100));
    assert_eq!(got[3], Got::Message(5, vec![0xfb, 0x2c, 0x01]));
    assert_eq!(got[4], Got::Message(3, vec![42]));
    assert_eq!(encoder.senders(), 1);
    // The freed slot goes to the next newcomer, who comes whole.
    send(&mut encoder, 400, 2, &walker(5.0, 5.0));
    let content = frame(&mut encoder, 0);
    assert!(content.contains(&kind::ENTER));
    let got = read(&mut decoder, &content);
    assert_eq!(
        got,
        vec![Got::Moved(400, 2, (*walker(5.0, 5.0)).clone(), true)]
    );
    assert_eq!(decoder.senders(), 2);
}

#[test]
fn a_position_beyond_the_range_is_clamped_not_wrapped() {
    let mut encoder = CompactEncoder::new(DEFAULT_PRECISION);
    let mut decoder = CompactDecoder::new();
    let far = Arc::new(Transform {
        position: [f32::MAX, -1e30, 0.0],
        ..Transform::default()
    });
    send(&mut encoder, 1, 0, &far);
    send(&mut encoder, 1, 0, &walker(0.0, 0.0));
    let got = read(&mut decoder, &frame(&mut encoder, 0));
    let Got::Moved(_, _, t, _) = &got[0] else {
        panic!()
    };
    let edge = MAX_UNITS as f32 * DEFAULT_PRECISION;
    assert_eq!(t.position[0], edge);
    assert_eq!(t.position[1], -edge);
    let Got::Moved(_, _, t, _) = &got[1] else {
        panic!()
    };
    assert_eq!(t.position, [0.0; 3]);
}

/// A long stream of every kind of record.
fn sample_stream() -> Vec<u8> {
    let mut encoder = CompactEncoder::new(0.05);
    for i in 0..20u32 {
        let t = Arc::new(Transform {
            position: [i as f32, 1.5, -(i as f32) * 3.0],
            rotation: [0.0, i as f32 * 20.0, 0.0],
            zone: format!("z{}", i % 3),
            state: (i % 2 == 0).then(MovementState::default),
            extra: BTreeMap::from([("k".into(), i.to_string())]),
        });
        send(&mut encoder, i % 4 + 300, u64::from(i) * 50, &t);
        if i % 7 == 6 {
            encoder.left(i % 4 + 300);
        }
    }
    encoder.message(7, b"hello");
    let mut out = Vec::new();
    encoder.finish(70_000, 5_000_000_000, &mut out);
    out
}

#[test]
fn a_cut_or_damaged_frame_is_an_error_never_a_panic() {
    let stream = sample_stream();
    let mut whole = CompactDecoder::new();
    let records = read(&mut whole, &stream).len();
    assert!(records > 20);
    for cut in 0..stream.len() {
        let mut decoder = CompactDecoder::new();
        let mut seen = 0;
        let result = decoder.read(&stream[..cut], |_| seen += 1);
        // A cut at a record's end reads as the records before it.
        assert!(result.is_err() || seen < records, "{cut}");
    }
    // Bytes flipped anywhere, one at a time: decoded or refused.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..3_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut damaged = stream.clone();
        let at = state as usize % damaged.len();
        damaged[at] ^= (state >> 32) as u8 | 1;
        let _ = CompactDecoder::new().read(&damaged, |_| {});
    }
    // What a decoder refuses, and says why.
    let mut decoder = CompactDecoder::new();
    let transform_first = [0, 0, kind::TRANSFORM | flag::WHOLE, 0, 0];
    let err = decoder.read(&transform_first, |_| {}).unwrap_err();
    assert!(err.to_string().contains("setup"), "{err}");
    let huge_slot = [0, 0, kind::ENTER, 0xfc, 0xff, 0xff, 0xff, 0x7f, 1];
    let err = decoder.read(&huge_slot, |_| {}).unwrap_err();
    assert!(err.to_string().contains("slot"), "{err}");
}
