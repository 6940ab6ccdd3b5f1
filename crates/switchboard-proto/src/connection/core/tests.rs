//! ConnectionCore on a back-to-back pair: what one transmits, the other reads.

use super::*;
use crate::codec::CodecConfig;
use std::time::Duration;

/// Two cores joined back to back: what one transmits, the other reads.
fn carry(from: &mut ConnectionCore, to: &mut ConnectionCore, now: Instant) {
    while let Some(bytes) = from.poll_transmit() {
        to.handle_bytes(&bytes, now);
    }
}

fn events(core: &mut ConnectionCore) -> Vec<SocketEvent> {
    std::iter::from_fn(|| core.poll_event()).collect()
}

fn pair(now: Instant) -> (ConnectionCore, ConnectionCore) {
    let mut a = ConnectionCore::new(SocketConfig::default(), now);
    let mut b = ConnectionCore::new(SocketConfig::default(), now);
    carry(&mut a, &mut b, now);
    carry(&mut b, &mut a, now);
    assert!(matches!(events(&mut a)[..], [SocketEvent::Connected]));
    assert!(matches!(events(&mut b)[..], [SocketEvent::Connected]));
    (a, b)
}

#[test]
fn hellos_open_both_sides_and_messages_cross_in_any_split() {
    let now = Instant::now();
    let (mut a, mut b) = pair(now);
    let message = Message::from_raw(16, 3, Bytes::from(vec![7u8; 5000]));
    a.send(&message, now).unwrap();
    let bytes: Vec<u8> = std::iter::from_fn(|| a.poll_transmit()).flatten().collect();
    for chunk in bytes.chunks(7) {
        b.handle_bytes(chunk, now);
    }
    match &events(&mut b)[..] {
        [SocketEvent::Received(got)] => assert_eq!(got, &message),
        other => panic!("{other:?}"),
    }
    assert_eq!(b.stats().frames_in, 2, "the hello and the message");
}

#[test]
fn a_quiet_side_pings_measures_the_round_trip_and_a_silent_peer_is_dropped() {
    let now = Instant::now();
    let (mut a, mut b) = pair(now);
    let ping_at = a.poll_timeout().unwrap();
    assert_eq!(ping_at, now + SocketConfig::default().keepalive_interval);
    a.handle_timeout(ping_at);
    carry(&mut a, &mut b, ping_at);
    let back = ping_at + Duration::from_millis(40);
    carry(&mut b, &mut a, back);
    assert_eq!(a.stats().rtt_micros, 40_000);
    // b hears nothing more: idle after idle_timeout.
    let idle = back + SocketConfig::default().idle_timeout;
    b.handle_timeout(idle);
    // Its close is queued, to go within close_timeout; the end is heard
    // once it is out (the silent peer is not waited for).
    assert!(events(&mut b).is_empty() && !b.is_open() && !b.should_shutdown());
    assert_eq!(
        b.poll_timeout(),
        Some(idle + SocketConfig::default().close_timeout)
    );
    while b.poll_transmit().is_some() {}
    assert!(matches!(
        events(&mut b)[..],
        [SocketEvent::Disconnected(DisconnectReason::IdleTimeout)]
    ));
    assert!(b.is_closed() && b.should_shutdown() && b.poll_timeout().is_none());
}

#[test]
fn a_close_reaches_the_peer_with_its_code_and_reason_after_what_was_queued() {
    let now = Instant::now();
    let (mut a, mut b) = pair(now);
    a.send(&Message::from_raw(16, 1, Bytes::new()), now)
        .unwrap();
    a.close(CloseCode::NORMAL, "bye", now);
    assert!(matches!(
        a.send(&Message::from_raw(16, 1, Bytes::new()), now),
        Err(SendError::Closed)
    ));
    carry(&mut a, &mut b, now);
    match &events(&mut b)[..] {
        [SocketEvent::Received(_), SocketEvent::Disconnected(DisconnectReason::ClosedByPeer { code, reason })] =>
        {
            assert_eq!((*code, reason.as_str()), (CloseCode::NORMAL, "bye"))
        }
        other => panic!("{other:?}"),
    }
    a.handle_eof(now);
    assert!(matches!(
        &events(&mut a)[..],
        [SocketEvent::Disconnected(DisconnectReason::Closed { reason, .. })] if reason == "bye"
    ));
}

#[test]
fn a_stranger_another_version_and_a_late_hello_are_refused_with_their_reason() {
    let now = Instant::now();
    let mut core = ConnectionCore::new(SocketConfig::default(), now);
    core.handle_bytes(b"GET / HTTP/1.1\r\n\r\n", now);
    assert!(matches!(
        events(&mut core)[..],
        [SocketEvent::Disconnected(DisconnectReason::NotSwitchboard)]
    ));
    let mut core = ConnectionCore::new(SocketConfig::default(), now);
    core.handle_bytes(&control::hello_frame(PROTOCOL_VERSION + 1), now);
    assert!(matches!(
        events(&mut core)[..],
        [SocketEvent::Disconnected(
            DisconnectReason::VersionMismatch { .. }
        )]
    ));
    let mut core = ConnectionCore::new(SocketConfig::default(), now);
    core.handle_timeout(now + SocketConfig::default().handshake_timeout);
    assert!(matches!(
        events(&mut core)[..],
        [SocketEvent::Disconnected(
            DisconnectReason::HandshakeTimeout
        )]
    ));
    // Each told the peer why in a close frame after our hello.
    let sent: Vec<Bytes> = std::iter::from_fn(|| core.poll_transmit()).collect();
    assert_eq!(sent.len(), 2);
}

#[test]
fn a_bad_frame_ends_the_connection_as_a_protocol_error() {
    let now = Instant::now();
    let (mut a, _) = pair(now);
    a.handle_bytes(&[0, 0, 0, 2, 0x80, 0], now);
    while a.poll_transmit().is_some() {}
    assert!(matches!(
        events(&mut a)[..],
        [
            SocketEvent::Error(SocketError::Frame(_)),
            SocketEvent::Disconnected(DisconnectReason::ProtocolError(_))
        ]
    ));
}

#[test]
fn an_owner_that_leaves_its_events_waiting_stops_the_reading_not_the_peer() {
    let now = Instant::now();
    let config = SocketConfig {
        event_queue_len: 4,
        ..SocketConfig::default()
    };
    let mut a = ConnectionCore::new(config.clone(), now);
    let mut b = ConnectionCore::new(config.clone(), now);
    carry(&mut a, &mut b, now);
    carry(&mut b, &mut a, now);
    for i in 0..10u8 {
        a.send(&Message::from_raw(16, 1, Bytes::from(vec![i])), now)
            .unwrap();
    }
    carry(&mut a, &mut b, now);
    // Connected and three messages fill b's four; the rest wait unread.
    assert!(!b.wants_read());
    // Long past the idle timeout, b's owner has taken nothing: not idle.
    let later = now + config.idle_timeout * 3;
    b.handle_timeout(later);
    assert!(!b.is_closed());
    let got = events(&mut b);
    assert_eq!(got.len(), 4, "{got:?}");
    // Taken: the rest is read at the next call that knows the time, and the
    // peer counts as heard from then.
    b.handle_timeout(later);
    let rest = events(&mut b);
    assert_eq!(rest.len(), 4, "{rest:?}");
    b.handle_timeout(later);
    assert_eq!(events(&mut b).len(), 3, "all ten, in order");
    assert!(b.wants_read() && !b.is_closed());
    b.handle_timeout(later + config.idle_timeout);
    while b.poll_transmit().is_some() {}
    assert!(matches!(
        events(&mut b)[..],
        [SocketEvent::Disconnected(DisconnectReason::IdleTimeout)]
    ));
}

#[test]
fn connections_sharing_a_budget_cannot_refill_it_by_reconnecting() {
    let now = Instant::now();
    let config = SocketConfig {
        max_inflated_per_second: 1024 * 1024,
        ..SocketConfig::default()
    };
    let budget = Arc::new(Mutex::new(InflateBudget::new(
        config.max_inflated_per_second,
        config.codec.max_decompressed_len,
        now,
    )));
    // A message that inflates to 2 MiB from a few KiB.
    let big = Message::from_raw(16, 1, Bytes::from(vec![0u8; 2 * 1024 * 1024]));
    let mut refused = 0;
    for _ in 0..3 {
        let mut sender = ConnectionCore::new(config.clone(), now);
        let mut receiver = ConnectionCore::with_budget(config.clone(), budget.clone(), now);
        carry(&mut sender, &mut receiver, now);
        carry(&mut receiver, &mut sender, now);
        sender.send(&big, now).unwrap();
        carry(&mut sender, &mut receiver, now);
        refused += usize::from(
            events(&mut receiver)
                .iter()
                .any(|e| matches!(e, SocketEvent::Error(SocketError::InflateBudget { .. }))),
        );
    }
    assert!(refused >= 2, "the budget was refilled ({refused} refused)");
}

#[test]
fn a_peer_that_does_not_read_is_dropped_as_a_slow_consumer_at_the_queue_bound() {
    let now = Instant::now();
    let config = SocketConfig {
        outbound_queue_len: 8,
        codec: CodecConfig::default(),
        ..SocketConfig::default()
    };
    let mut a = ConnectionCore::new(config, now);
    let message = Message::from_raw(16, 1, Bytes::from_static(b"x"));
    let results: Vec<_> = (0..8).map(|_| a.send(&message, now)).collect();
    assert!(
        results[..7].iter().all(Result::is_ok),
        "the hello and 7 messages fit"
    );
    assert!(matches!(results[7], Err(SendError::SlowConsumer)));
    assert!(matches!(
        events(&mut a)[..],
        [SocketEvent::Disconnected(DisconnectReason::SlowConsumer)]
    ));
}
