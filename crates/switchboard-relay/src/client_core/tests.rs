use std::sync::Arc;

use super::*;
use crate::compact::{CompactEncoder, Quantized, Versions, DEFAULT_PRECISION};
use crate::server::{Batch, RELAY_CHANNEL};
use crate::transform::MovementState;
use crate::zones::RedirectForm;

/// What the core made of one message, owned.
#[derive(Debug, PartialEq)]
enum Got {
    Welcome(u32),
    Moved(u32, [f32; 3], Option<String>),
    Left(u32),
    Notice(String),
    Error(String),
    Redirect(String),
    Broken,
}

fn take(core: &mut RelayClientCore, message: &Message) -> Vec<Got> {
    let mut got = Vec::new();
    core.received(message, |event| {
        got.push(match event {
            RelayClientEvent::Welcome(id) => Got::Welcome(id),
            RelayClientEvent::Transform(heard) => {
                let peek = heard.peek("emote").expect("a transform that reads");
                let (id, time, transform) = heard.decode().expect("a transform that decodes");
                assert_eq!((peek.player_id, peek.server_time_ms), (id, time));
                assert_eq!(peek.position, transform.position);
                Got::Moved(id, transform.position, peek.field.map(str::to_string))
            }
            RelayClientEvent::Left(id) => Got::Left(id),
            RelayClientEvent::Notice(text) => Got::Notice(text),
            RelayClientEvent::Error(text) => Got::Error(text),
            RelayClientEvent::Redirect(redirect) => Got::Redirect(redirect.addr),
            RelayClientEvent::Broken(_) => Got::Broken,
        })
    });
    got
}

fn message(action: RelayAction, content: &impl serde::Serialize) -> Message {
    Message::new(RelayChannel, action, content).unwrap()
}

fn relayed(player_id: u32, x: f32, emote: Option<&str>) -> Relayed {
    let mut transform = Transform {
        position: [x, 2.0, 3.0],
        zone: "hall".into(),
        ..Transform::default()
    };
    if let Some(emote) = emote {
        transform.extra.insert("emote".into(), emote.into());
    }
    Relayed {
        player_id,
        server_time_ms: 99,
        transform,
    }
}

fn redirect() -> Redirect {
    Redirect {
        addr: "10.0.0.2:7300".into(),
        websocket: None,
        ticket: Handover {
            player_id: 7,
            name: "ann".into(),
            bot: false,
            process: 2,
            expires_ms: 1,
            nonce: [3; 16],
            mac: [4; 32],
        },
        quic: Some("10.0.0.2:7302".into()),
        webtransport: Some(vec!["ab".repeat(32), "cd".repeat(32)]),
    }
}

#[test]
fn a_redirect_names_the_quic_address_only_to_a_quic_player_and_reads_either_way() {
    let to = redirect();
    let plain = to.encode(RedirectForm::Plain).unwrap();
    // What a client of before the QUIC address reads, whole.
    let old: Redirect = codec::decode_value(&plain).unwrap();
    assert_eq!((old.addr.as_str(), old.quic), ("10.0.0.2:7300", None));
    assert_eq!(Redirect::read(&plain).unwrap().quic, None);
    let quic = to.encode(RedirectForm::Quic).unwrap();
    assert_eq!(quic.len(), plain.len() + 1 + 1 + "10.0.0.2:7302".len());
    let read = Redirect::read(&quic).unwrap();
    assert_eq!((read.quic, read.webtransport), (to.quic.clone(), None));
}

#[test]
fn a_redirect_to_a_webtransport_player_carries_the_hashes_after_the_quic_address() {
    let to = redirect();
    let quic = to.encode(RedirectForm::Quic).unwrap();
    let web = to.encode(RedirectForm::WebTransport).unwrap();
    // docs/PROTOCOL.md's example: Some, two hashes of 64 characters.
    let mut tail = vec![1, 2, 64];
    tail.extend_from_slice("ab".repeat(32).as_bytes());
    tail.push(64);
    tail.extend_from_slice("cd".repeat(32).as_bytes());
    assert_eq!(&web[..quic.len()], &quic[..]);
    assert_eq!(&web[quic.len()..], &tail[..]);
    assert_eq!(Redirect::read(&web).unwrap(), to);
    // Anything more after the last field is not a redirect.
    let mut longer = web.clone();
    longer.push(0);
    assert!(Redirect::read(&longer).is_err());
    // No WebTransport on the other relay: `None`, one byte.
    let none = Redirect {
        webtransport: None,
        ..to
    };
    let bytes = none.encode(RedirectForm::WebTransport).unwrap();
    assert_eq!(bytes.len(), quic.len() + 1);
    assert_eq!(Redirect::read(&bytes).unwrap(), none);
}

#[test]
fn a_connection_opens_with_the_hello_then_the_options_and_after_a_redirect_with_its_ticket() {
    let compact = RelayOptions {
        batch: false,
        compact: true,
        datagrams: false,
        webtransport_redirects: false,
        compact_datagrams: false,
    };
    let mut core = RelayClientCore::new("ann", false).with_options(compact);
    let first = core.opened();
    let actions: Vec<_> = first.iter().map(|m| m.action::<RelayAction>()).collect();
    assert_eq!(
        actions,
        [Some(RelayAction::Hello), Some(RelayAction::Options)]
    );
    assert_eq!(
        first[0].content::<RelayHello>().unwrap(),
        RelayHello {
            name: "ann".into(),
            bot: false
        }
    );
    assert_eq!(first[1].content::<RelayOptions>().unwrap(), compact);
    assert_eq!(
        take(&mut core, &message(RelayAction::Welcome, &7u32)),
        [Got::Welcome(7)]
    );
    assert_eq!(core.player_id(), Some(7));
    // The zone lives elsewhere: the next connection presents the ticket,
    // once; a connection after that says hello again.
    let to = redirect();
    assert_eq!(
        take(&mut core, &message(RelayAction::Redirect, &to)),
        [Got::Redirect(to.addr.clone())]
    );
    assert!(core.redirected());
    core.lost();
    assert_eq!(core.player_id(), None);
    let next = core.opened();
    assert_eq!(next[0].action::<RelayAction>(), Some(RelayAction::Handover));
    assert_eq!(next[0].content::<Handover>().unwrap(), to.ticket);
    assert!(!core.redirected());
    core.lost();
    assert_eq!(
        core.opened()[0].action::<RelayAction>(),
        Some(RelayAction::Hello)
    );
    // Default options are not sent.
    let plain = RelayClientCore::new("bob", true).opened();
    assert_eq!(plain.len(), 1);
}

#[test]
fn every_form_the_relay_writes_reads_as_the_same_events_in_order() {
    let mut core = RelayClientCore::new("ann", false);
    core.opened();
    let a = relayed(5, 1.0, Some("\"wave\""));
    let b = relayed(6, 4.0, None);
    // One by one.
    let mut alone = take(&mut core, &message(RelayAction::Relayed, &a));
    alone.extend(take(&mut core, &message(RelayAction::Left, &6u32)));
    alone.extend(take(&mut core, &message(RelayAction::Notice, &"hi")));
    alone.extend(take(&mut core, &message(RelayAction::Error, &"no")));
    let expected = [
        Got::Moved(5, [1.0, 2.0, 3.0], Some("\"wave\"".into())),
        Got::Left(6),
        Got::Notice("hi".into()),
        Got::Error("no".into()),
    ];
    assert_eq!(alone, expected);
    // In a batch.
    let batch = Batch {
        tick: 1,
        server_time_ms: 100,
        messages: vec![
            (RelayAction::Relayed.id(), encode(&a)),
            (RelayAction::Left.id(), encode(&6u32)),
            (RelayAction::Notice.id(), encode(&"hi")),
            (RelayAction::Error.id(), encode(&"no")),
        ],
    };
    assert_eq!(
        take(&mut core, &message(RelayAction::Batch, &batch)),
        expected
    );
    // As compact records, on a connection that asked for them.
    let mut core = RelayClientCore::new("ann", false).with_options(RelayOptions {
        batch: false,
        compact: true,
        datagrams: false,
        webtransport_redirects: false,
        compact_datagrams: false,
    });
    core.opened();
    let mut encoder = CompactEncoder::new(DEFAULT_PRECISION);
    let mut versions = Versions::default();
    for r in [&a, &b] {
        let t = Arc::new(r.transform.clone());
        let q = Quantized::of(r.player_id, &t, encoder.precision(), &mut versions);
        encoder.transform(r.player_id, r.server_time_ms, &q, &t);
    }
    encoder.left(6);
    encoder.message(RelayAction::Welcome.id(), &encode(&9u32));
    let mut frame = Vec::new();
    encoder.finish(1, 100, &mut frame);
    let compact = Message::from_raw(RELAY_CHANNEL, RelayAction::Compact.id(), frame.into());
    assert_eq!(
        take(&mut core, &compact),
        [
            Got::Moved(5, [1.0, 2.0, 3.0], Some("\"wave\"".into())),
            Got::Moved(6, [4.0, 2.0, 3.0], None),
            Got::Left(6),
            Got::Welcome(9),
        ]
    );
    assert_eq!(core.player_id(), Some(9));
}

/// A value's bincode, for building batches by hand.
fn encode(value: &impl serde::Serialize) -> Vec<u8> {
    codec::encode_value(value).unwrap()
}

#[test]
fn compact_records_not_asked_for_or_damaged_and_garbage_break_the_stream_without_a_panic() {
    let mut core = RelayClientCore::new("ann", false);
    core.opened();
    let compact = |bytes: &[u8]| {
        Message::from_raw(
            RELAY_CHANNEL,
            RelayAction::Compact.id(),
            bytes.to_vec().into(),
        )
    };
    assert_eq!(take(&mut core, &compact(&[1, 2, 3])), [Got::Broken]);
    let mut core = RelayClientCore::new("ann", false).with_options(RelayOptions {
        batch: false,
        compact: true,
        datagrams: false,
        webtransport_redirects: false,
        compact_datagrams: false,
    });
    core.opened();
    assert_eq!(take(&mut core, &compact(&[0xff; 9])), [Got::Broken]);
    // A welcome that is not a number, a batch whose head is cut.
    assert_eq!(
        take(&mut core, &message(RelayAction::Welcome, &"seven")),
        [Got::Broken]
    );
    let cut = Message::from_raw(RELAY_CHANNEL, RelayAction::Batch.id(), vec![253].into());
    assert_eq!(take(&mut core, &cut), [Got::Broken]);
    // Another channel's message is not the relay's.
    let other = Message::from_raw(RELAY_CHANNEL + 1, RelayAction::Welcome.id(), vec![7].into());
    assert!(take(&mut core, &other).is_empty());
}

#[test]
fn a_batchs_messages_read_in_place() {
    let batch = Batch {
        tick: 3,
        server_time_ms: 70_000,
        messages: vec![(4, vec![1, 2, 3]), (5, vec![9; 300])],
    };
    let bytes = codec::encode_value(&batch).unwrap();
    let (at, messages) = batch_messages(&bytes).unwrap();
    let read: Vec<(u16, Vec<u8>)> = messages.map(|(a, c)| (a, c.to_vec())).collect();
    assert_eq!((at, read), (70_000, batch.messages));
    for cut in 0..bytes.len() {
        // A cut batch reads as fewer messages, never a panic.
        let n = batch_messages(&bytes[..cut]).map_or(0, |(_, m)| m.count());
        assert!(n < 2, "{cut}");
    }
}

#[test]
fn peek_reads_every_shape_of_relayeds_layout_and_nothing_from_a_cut_one() {
    let a = relayed(7, 1.0, Some("[41,1234567]"));
    let bytes = codec::encode_value(&a).unwrap();
    let peek = Peek {
        player_id: 7,
        server_time_ms: 99,
        position: [1.0, 2.0, 3.0],
        field: Some("[41,1234567]"),
    };
    assert_eq!(Heard::Encoded(&bytes).peek("emote"), Some(peek));
    assert_eq!(
        Heard::Encoded(&bytes).peek("other"),
        Some(Peek {
            field: None,
            ..peek
        })
    );
    assert_eq!(Heard::Encoded(b"\x01\x02").peek("emote"), None);
    // Wide integers (varint markers), a movement state, a long zone, the
    // field among others; every truncation reads as nothing, never a panic.
    let mut wide = a;
    wide.player_id = 70_000;
    wide.server_time_ms = 5_000_000_000;
    wide.transform.zone = "z".repeat(300);
    wide.transform.state = Some(MovementState {
        moving: true,
        speed: 2.5,
        ..MovementState::default()
    });
    wide.transform.extra.insert("zz".into(), "1".into());
    let bytes = codec::encode_value(&wide).unwrap();
    let whole = Some(Peek {
        player_id: 70_000,
        server_time_ms: 5_000_000_000,
        ..peek
    });
    assert_eq!(Heard::Encoded(&bytes).peek("emote"), whole);
    for cut in 0..bytes.len() {
        let got = Heard::Encoded(&bytes[..cut]).peek("emote");
        assert!(got.is_none() || got == whole, "{cut}");
    }
}

/// A `Batch` message on `channel` at the relay's time `at`.
fn batch_on(channel: u16, at: u64, messages: Vec<(RelayAction, Vec<u8>)>) -> Message {
    let batch = Batch {
        tick: 0,
        server_time_ms: at,
        messages: messages.into_iter().map(|(a, c)| (a.id(), c)).collect(),
    };
    let content = codec::encode_value(&batch).unwrap();
    Message::from_raw(channel, RelayAction::Batch.id(), content.into())
}

/// Player `id`'s transform at `x`, stamped `at`, on the view channel.
fn seen(id: u32, x: f32, at: u64) -> Message {
    let relayed = Relayed {
        player_id: id,
        server_time_ms: at,
        transform: Transform {
            position: [x, 0.0, 0.0],
            ..Transform::default()
        },
    };
    let content = codec::encode_value(&relayed).unwrap();
    let view = switchboard::message::RELAY_VIEW_CHANNEL;
    batch_on(view, at, vec![(RelayAction::Relayed, content)])
}

#[test]
fn a_datagram_client_keeps_each_player_s_newest_and_no_one_comes_back_from_before_leaving() {
    let mut core = RelayClientCore::new("ann", false).with_options(RelayOptions {
        datagrams: true,
        ..RelayOptions::default()
    });
    core.opened();
    let moved = |x| vec![Got::Moved(7, [x, 0.0, 0.0], None)];
    assert_eq!(take(&mut core, &seen(7, 1.0, 100)), moved(1.0));
    assert_eq!(
        take(&mut core, &seen(8, 5.0, 95)),
        vec![Got::Moved(8, [5.0, 0.0, 0.0], None)],
        "each player its own"
    );
    assert_eq!(take(&mut core, &seen(7, 0.5, 90)), vec![], "overtaken");
    assert_eq!(take(&mut core, &seen(7, 1.0, 100)), vec![], "repeated");
    // Player 7 leaves at 120 (on the stream); its transform of 110 comes
    // after, late: it does not bring 7 back.
    let left = codec::encode_value(&7u32).unwrap();
    let leaving = batch_on(RELAY_CHANNEL, 120, vec![(RelayAction::Left, left)]);
    assert_eq!(take(&mut core, &leaving), vec![Got::Left(7)]);
    assert_eq!(take(&mut core, &seen(7, 2.0, 110)), vec![]);
    // Back in view later.
    assert_eq!(take(&mut core, &seen(7, 3.0, 130)), moved(3.0));
    // Far behind the relay's clock: nothing in flight is that old.
    assert_eq!(
        take(&mut core, &seen(9, 1.0, 130 + VIEW_MEMORY_MS + 10)).len(),
        1
    );
    assert_eq!(
        take(&mut core, &seen(10, 1.0, 5)),
        vec![],
        "too old to matter"
    );
    // On the view channel, only transforms count.
    let welcome = codec::encode_value(&99u32).unwrap();
    let view = switchboard::message::RELAY_VIEW_CHANNEL;
    let odd = batch_on(view, 200, vec![(RelayAction::Welcome, welcome)]);
    assert_eq!(take(&mut core, &odd), vec![]);
    assert_eq!(core.player_id(), None);
}
