use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::compact::{
    dequantize, pack_rotation, pack_state, quantize, unpack_rotation, unpack_state, Versions,
    DEFAULT_PRECISION,
};
use crate::transform::MovementState;

/// The relay's versions of zones and unknown fields, shared by a test's
/// encoders (as the relay's are by its clients').
fn quantized(versions: &mut Versions, player: u32, t: &Arc<Transform>) -> Quantized {
    Quantized::of(player, t, DEFAULT_PRECISION, versions)
}

/// What a client reads of `transform`: positions and angles to the
/// relay's precision.
fn as_read(transform: &Transform) -> Transform {
    let (bits, speed) = pack_state(transform.state.as_ref());
    Transform {
        position: transform
            .position
            .map(|v| dequantize(quantize(v, DEFAULT_PRECISION), DEFAULT_PRECISION)),
        rotation: unpack_rotation(pack_rotation(transform.rotation)),
        state: unpack_state(bits, speed),
        ..transform.clone()
    }
}

fn datagrams(encoder: &mut ViewEncoder, tick: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    encoder.finish(tick, tick * 50, |content| out.push(content.to_vec()));
    out
}

fn read(decoder: &mut ViewDecoder, content: &[u8]) -> Option<Vec<(u32, u64, Transform)>> {
    let mut got = Vec::new();
    decoder
        .read(content, |r| {
            got.push((r.player_id, r.server_time_ms, r.transform.clone()))
        })
        .unwrap()
        .map(|_| got)
}

fn walker(x: f32) -> Arc<Transform> {
    Arc::new(Transform {
        position: [x, 1.5, -20.0],
        rotation: [0.0, 90.0, 0.0],
        zone: "field".into(),
        ..Transform::default()
    })
}

#[test]
fn a_step_against_an_acknowledged_baseline_is_a_few_bytes_and_reads_back() {
    let mut versions = Versions::default();
    let mut encoder = ViewEncoder::new(DEFAULT_PRECISION);
    let mut decoder = ViewDecoder::new();
    let first = walker(10.0);
    encoder.transform(7, 1_000, &quantized(&mut versions, 7, &first), &first);
    let sent = datagrams(&mut encoder, 1);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        read(&mut decoder, &sent[0]).unwrap(),
        [(7, 1_000, as_read(&first))]
    );
    // Not acknowledged yet: whole again.
    let second = walker(10.5);
    encoder.transform(7, 1_050, &quantized(&mut versions, 7, &second), &second);
    let whole = datagrams(&mut encoder, 2);
    assert_eq!(
        read(&mut decoder, &whole[0]).unwrap(),
        [(7, 1_050, as_read(&second))]
    );
    // Acknowledged: the next is the difference from the newest of them.
    let ack = decoder.ack().expect("two datagrams read");
    assert_eq!(ack, ViewAck { newest: 2, mask: 1 });
    assert_eq!(decoder.ack(), None, "nothing new since");
    encoder.ack(ViewAck::read(&ack.encode()).unwrap());
    let third = walker(11.0);
    encoder.transform(7, 1_100, &quantized(&mut versions, 7, &third), &third);
    let step = datagrams(&mut encoder, 3);
    assert_eq!(
        read(&mut decoder, &step[0]).unwrap(),
        [(7, 1_100, as_read(&third))]
    );
    // Head (number, tick, time 150 in three bytes, precision: 1 + 1 + 3 +
    // 4 bytes), then the record: head, player, age, time, three
    // coordinates (50 cm, 0, 0: a byte each).
    assert_eq!(step[0].len() - 9, 7, "{:?}", step[0]);
    assert!(whole[0].len() > step[0].len() + 10);
}

/// A walk of three players over a link that loses a third of the view
/// datagrams and a third of the acknowledgements, which arrive two ticks
/// late: every datagram the client gets reads whole, exactly, and records
/// stay small.
#[test]
fn over_a_lossy_link_every_datagram_received_reads_whole_and_lost_ones_are_never_baselines() {
    let mut versions = Versions::default();
    let mut encoder = ViewEncoder::new(DEFAULT_PRECISION);
    // The same view never acknowledged: every record whole.
    let mut unacked = ViewEncoder::new(DEFAULT_PRECISION);
    let mut decoder = ViewDecoder::new();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut chance = move |percent: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % 100 < percent
    };
    let mut acks: Vec<(u64, ViewAck)> = Vec::new();
    let (mut bytes, mut whole_bytes, mut received) = (0usize, 0usize, 0usize);
    for tick in 1..=600u64 {
        let mut truth = BTreeMap::new();
        for player in [3u32, 40, 500] {
            let x = tick as f32 * 0.25 + player as f32;
            let mut t = Transform {
                position: [x, 0.0, (tick as f32 * 0.1).sin() * 5.0],
                rotation: [0.0, (tick / 10 % 36 * 10) as f32, 0.0],
                zone: if tick % 200 < 100 { "north" } else { "south" }.into(),
                ..Transform::default()
            };
            if tick % 50 < 10 {
                t.state = Some(MovementState {
                    moving: true,
                    speed: 2.5,
                    ..MovementState::default()
                });
            }
            if player == 40 && tick % 90 == 0 {
                t.extra.insert("hp".into(), format!("{}", tick / 90));
            }
            let t = Arc::new(t);
            let q = quantized(&mut versions, player, &t);
            encoder.transform(player, tick * 50, &q, &t);
            unacked.transform(player, tick * 50, &q, &t);
            truth.insert(player, as_read(&t));
        }
        let whole = datagrams(&mut unacked, tick);
        for (datagram, whole) in datagrams(&mut encoder, tick).into_iter().zip(whole) {
            if chance(33) {
                continue;
            }
            received += 1;
            let got = read(&mut decoder, &datagram).expect("never older here");
            assert_eq!(got.len(), 3, "tick {tick}: {got:?}");
            for (player, _, transform) in got {
                assert_eq!(transform, truth[&player], "tick {tick}, player {player}");
            }
            if tick > 20 {
                bytes += datagram.len();
                whole_bytes += whole.len();
            }
        }
        if let Some(ack) = decoder.ack() {
            if !chance(33) {
                acks.push((tick + 2, ack));
            }
        }
        for (_, ack) in acks.iter().filter(|(at, _)| *at == tick) {
            encoder.ack(*ack);
        }
        acks.retain(|(at, _)| *at > tick);
    }
    assert_eq!(decoder.unresolved(), 0);
    assert!(received > 350, "{received}");
    // Against baselines a few ticks old (a third lost, acknowledgements two
    // ticks late), datagrams of three records are little more than half
    // the size of whole ones (measured: 0.53).
    let ratio = bytes as f64 / whole_bytes as f64;
    assert!(ratio < 0.6, "{bytes} bytes against {whole_bytes} whole");
}

#[test]
fn a_datagram_older_than_the_newest_read_is_dropped() {
    let mut versions = Versions::default();
    let mut encoder = ViewEncoder::new(DEFAULT_PRECISION);
    let mut decoder = ViewDecoder::new();
    let mut sent = Vec::new();
    for tick in 1..=2 {
        let t = walker(tick as f32);
        encoder.transform(1, tick * 50, &quantized(&mut versions, 1, &t), &t);
        sent.extend(datagrams(&mut encoder, tick));
    }
    assert!(read(&mut decoder, &sent[1]).is_some());
    assert_eq!(read(&mut decoder, &sent[0]), None);
    assert_eq!(decoder.ack(), Some(ViewAck { newest: 2, mask: 0 }));
}

#[test]
fn an_acknowledgement_of_a_datagram_not_sent_yet_is_ignored() {
    let mut versions = Versions::default();
    let mut encoder = ViewEncoder::new(DEFAULT_PRECISION);
    let t = walker(1.0);
    encoder.transform(1, 50, &quantized(&mut versions, 1, &t), &t);
    // Datagram 1 is written, not sent: a client cannot have read it.
    encoder.ack(ViewAck {
        newest: 1,
        mask: u32::MAX,
    });
    encoder.ack(ViewAck {
        newest: u64::MAX,
        mask: u32::MAX,
    });
    let first = datagrams(&mut encoder, 1);
    encoder.transform(1, 100, &quantized(&mut versions, 1, &t), &t);
    let second = datagrams(&mut encoder, 2);
    // Whole both times: the same length, bar the header's number.
    assert_eq!(first[0].len(), second[0].len());
    let mut decoder = ViewDecoder::new();
    assert!(read(&mut decoder, &second[0]).is_some());
}

#[test]
fn a_tick_past_a_datagram_s_bytes_goes_in_several_each_readable_alone() {
    let mut versions = Versions::default();
    let mut encoder = ViewEncoder::new(DEFAULT_PRECISION);
    for player in 0..200u32 {
        let t = walker(player as f32);
        encoder.transform(player, 50, &quantized(&mut versions, player, &t), &t);
    }
    let sent = datagrams(&mut encoder, 1);
    assert!(sent.len() >= 3, "{}", sent.len());
    assert!(sent.iter().all(|d| d.len() <= 1_100));
    // The last alone, then the first (older: dropped).
    let mut decoder = ViewDecoder::new();
    let last = read(&mut decoder, sent.last().unwrap()).unwrap();
    assert!(!last.is_empty() && last.iter().all(|(p, _, _)| *p >= 100));
    assert_eq!(read(&mut decoder, &sent[0]), None);
}

#[test]
fn an_acknowledgement_covers_the_newest_and_the_window_before_it() {
    let mut ack = ViewAck::default();
    assert!(!ack.covers(0) && !ack.covers(1));
    for frame in [5, 6, 8, 40] {
        ack.add(frame);
    }
    assert_eq!(ack.newest, 40);
    assert!(ack.covers(40) && ack.covers(8));
    assert!(!ack.covers(7) && !ack.covers(6) && !ack.covers(41));
    // 40 − 32 = 8 is the oldest the mask holds: 6 fell out of it.
    ack.add(39);
    assert!(ack.covers(39));
    assert_eq!(ViewAck::read(&ack.encode()), Some(ack));
    assert_eq!(ViewAck::read(&[]), None);
    assert_eq!(ViewAck::read(&[1, 0, 0, 0]), None, "a cut mask");
    assert_eq!(ViewAck::read(&[1, 0, 0, 0, 0, 9]), None, "bytes after it");
}

#[test]
fn bytes_that_are_no_view_datagram_are_an_error_never_a_panic() {
    let mut versions = Versions::default();
    let mut encoder = ViewEncoder::new(DEFAULT_PRECISION);
    let t = walker(3.0);
    encoder.transform(9, 50, &quantized(&mut versions, 9, &t), &t);
    let good = datagrams(&mut encoder, 1).remove(0);
    // Every cut of a real datagram, and every byte of it changed.
    for end in 0..good.len() {
        let _ = ViewDecoder::new().read(&good[..end], |_| {});
    }
    for at in 0..good.len() {
        for value in [0u8, 1, 0x7f, 0xfb, 0xfd, 0xff] {
            let mut bad = good.clone();
            bad[at] = value;
            let _ = ViewDecoder::new().read(&bad, |_| {});
        }
    }
    let mut decoder = ViewDecoder::new();
    let whole_twice = [&good[..7], &good[7..], &good[7..]].concat();
    assert!(decoder.read(&whole_twice, |_| {}).is_ok());
    let mut not_whole = good.clone();
    not_whole[7] = kind::TRANSFORM;
    assert!(ViewDecoder::new().read(&not_whole, |_| {}).is_err());
}

/// docs/PROTOCOL.md's vector: a whole record, its acknowledgement, then a
/// step against it.
#[test]
fn compact_view_datagrams_are_the_vectors_of_protocol_md() {
    let mut versions = Versions::default();
    let mut encoder = ViewEncoder::new(DEFAULT_PRECISION);
    let at = |x: f32| {
        Arc::new(Transform {
            position: [x, 0.0, 2.0],
            rotation: [0.0, 90.0, 0.0],
            zone: "z".into(),
            ..Transform::default()
        })
    };
    let first = at(1.0);
    encoder.transform(7, 100, &quantized(&mut versions, 7, &first), &first);
    let whole = datagrams(&mut encoder, 2).remove(0);
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(
        hex(&whole),
        "010264".to_owned()
            + "0ad7233c"
            + "7c070000"
            + "c800fb9001"
            + "00001000"
            + "80"
            + "017a"
            + "00"
    );
    let ack = ViewAck { newest: 1, mask: 0 };
    assert_eq!(hex(&ack.encode()), "0100000000");
    encoder.ack(ack);
    let second = at(1.5);
    encoder.transform(7, 150, &quantized(&mut versions, 7, &second), &second);
    let step = datagrams(&mut encoder, 3).remove(0);
    assert_eq!(
        hex(&step),
        "020396".to_owned() + "0ad7233c" + "00070100" + "640000"
    );
    let mut decoder = ViewDecoder::new();
    assert_eq!(
        read(&mut decoder, &whole).unwrap(),
        [(7, 100, as_read(&first))]
    );
    assert_eq!(
        read(&mut decoder, &step).unwrap(),
        [(7, 150, as_read(&second))]
    );
}

/// A sender that went out of view without a `Left` (the client changed
/// zone) is kept no longer than the window: a roaming client costs the
/// relay only the senders of its last datagrams.
#[test]
fn senders_not_sent_within_the_window_are_forgotten() {
    let mut versions = Versions::default();
    let mut encoder = ViewEncoder::new(DEFAULT_PRECISION);
    for tick in 1..=200u64 {
        // A new sender every tick, each sent once.
        let player = tick as u32;
        let t = walker(tick as f32);
        encoder.transform(player, tick * 50, &quantized(&mut versions, player, &t), &t);
        datagrams(&mut encoder, tick);
        assert!(
            encoder.senders() <= 2 * VIEW_WINDOW as usize,
            "{}",
            encoder.senders()
        );
    }
}
