//! The cases: the attacks of `tests/all/attacks.rs` that a connection answers
//! on its own, and the six rules the two drivers used to disagree on.

use std::io::Write;
use std::time::Duration;

use switchboard::{CloseCode, DisconnectReason, SocketConfig, PROTOCOL_VERSION};

use super::{Case, Expect, Step};
use crate::common::{hello, raw_frame};

fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// A message on channel 16 whose content is the string `text`.
fn say(text: &str) -> Vec<u8> {
    let mut body = vec![16, 1, text.len() as u8];
    body.extend_from_slice(text.as_bytes());
    raw_frame(0, &body)
}

/// The peer's graceful goodbye.
fn goodbye() -> Vec<u8> {
    raw_frame(0, &[0, 3, 0, 3, b'b', b'y', b'e'])
}

fn ping(stamp: u8) -> Vec<u8> {
    raw_frame(0, &[0, 1, stamp])
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn protocol_error(reason: &DisconnectReason) -> bool {
    matches!(reason, DisconnectReason::ProtocolError(_))
}

fn not_switchboard(reason: &DisconnectReason) -> bool {
    matches!(reason, DisconnectReason::NotSwitchboard)
}

fn closed_by_peer(reason: &DisconnectReason) -> bool {
    matches!(reason, DisconnectReason::ClosedByPeer { code, reason } if code.0 == 0 && reason == "bye")
}

/// Nothing but the end: no error, no message, no pong.
fn ends(reason: fn(&DisconnectReason) -> bool, close: Option<(CloseCode, &'static str)>) -> Expect {
    Expect {
        errors: vec![],
        received: 0..=0,
        reason,
        close,
        pongs: 0..=0,
    }
}

fn refused(text: &'static str) -> Expect {
    Expect {
        errors: vec![text],
        received: 0..=0,
        reason: protocol_error,
        close: Some((CloseCode::PROTOCOL_ERROR, text)),
        pongs: 0..=0,
    }
}

/// Quick timeouts, so that the tokio run of the timer cases takes a moment.
fn quick() -> SocketConfig {
    SocketConfig {
        handshake_timeout: ms(300),
        keepalive_interval: ms(150),
        idle_timeout: ms(400),
        close_timeout: ms(300),
        ..SocketConfig::default()
    }
}

/// Every case.
pub fn all() -> Vec<Case> {
    let bomb = {
        let mut payload = vec![16, 1];
        payload.extend(vec![0u8; 4 * 1024 * 1024 - 16]);
        raw_frame(1, &zlib(&payload))
    };
    let compressed_ping = {
        let mut payload = vec![0, 1];
        payload.extend(vec![0u8; 4096]);
        raw_frame(1, &zlib(&payload))
    };
    let mut hello_bomb = b"SWBD".to_vec();
    hello_bomb.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    hello_bomb.extend(vec![0u8; 4 * 1024 * 1024]);
    let pings: Vec<u8> = (0..100).flat_map(ping).collect();
    let talk: Vec<u8> = (0..600).flat_map(|i| say(&format!("m{i}"))).collect();
    vec![
        Case {
            name: "oversized_length_prefix_is_refused_before_buffering",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send(vec![0xff, 0xff, 0xff, 0xff, 0])],
            expect: refused("exceeds the limit"),
        },
        Case {
            name: "zero_length_frame_is_refused",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send(vec![0, 0, 0, 0])],
            expect: refused("zero"),
        },
        Case {
            name: "unknown_flag_bits_are_refused",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send(raw_frame(0b1000_0000, &[16, 1]))],
            expect: refused("unknown flag bits"),
        },
        Case {
            name: "zlib_bomb_is_stopped_at_the_inflate_limit",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send(raw_frame(
                1,
                &zlib(&vec![0u8; 32 * 1024 * 1024]),
            ))],
            expect: refused("inflate"),
        },
        Case {
            name: "corrupt_zlib_body_is_refused",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send(raw_frame(1, b"definitely not zlib"))],
            expect: refused("zlib"),
        },
        Case {
            name: "trailing_bytes_after_zlib_stream_are_refused",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send(raw_frame(
                1,
                &[zlib(&[16, 1, 0, 0]), b"extra".to_vec()].concat(),
            ))],
            expect: refused("trailing bytes"),
        },
        Case {
            // Decided: the owner hears the error, then the end (the tokio
            // driver's way; the core gave only the end).
            name: "garbage_envelope_is_reported_then_refused",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send(raw_frame(0, &[0xff, 0xff, 0xff]))],
            expect: refused("envelope"),
        },
        Case {
            // Decided: refused (the tokio driver's way; the core inflated it).
            name: "compressed_system_frame_is_refused",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send(compressed_ping)],
            expect: refused("compressed system frame"),
        },
        Case {
            // Decided: the budget holds on every driver (it was tokio's).
            name: "inflate_bomb_stream_is_closed_at_the_connection_s_inflate_budget",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send(bomb.repeat(20))],
            expect: Expect {
                received: 0..=3,
                ..refused("inflate past the budget")
            },
        },
        Case {
            name: "unknown_system_action_is_reported_and_ignored",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send(
                [raw_frame(0, &[0, 99]), say("hello"), goodbye()].concat(),
            )],
            expect: Expect {
                errors: vec!["99"],
                received: 1..=1,
                reason: closed_by_peer,
                close: None,
                pongs: 0..=0,
            },
        },
        Case {
            name: "truncated_frame_then_hang_up_is_a_protocol_error",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send(vec![0, 0, 0, 50, 0, 1, 2]), Step::HangUp],
            // The peer hung up its sending side only: it still reads why.
            expect: refused("inside a frame"),
        },
        Case {
            name: "hang_up_without_a_goodbye_is_connection_lost",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send(say("hi")), Step::HangUp],
            expect: Expect {
                errors: vec![],
                received: 1..=1,
                reason: |r| matches!(r, DisconnectReason::ConnectionLost(_)),
                close: None,
                pongs: 0..=0,
            },
        },
        Case {
            // Decided: a failed handshake writes our hello and the close,
            // then shuts the transport down (the tokio driver's way; the core
            // kept both queued).
            name: "wrong_magic_is_not_a_switchboard_peer",
            config: SocketConfig::default(),
            hello: false,
            steps: vec![Step::Send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec())],
            expect: ends(
                not_switchboard,
                Some((CloseCode::PROTOCOL_ERROR, "not a Switchboard peer")),
            ),
        },
        Case {
            name: "wrong_version_is_refused_with_both_versions_named",
            config: SocketConfig::default(),
            hello: false,
            steps: vec![Step::Send(hello(PROTOCOL_VERSION + 1))],
            expect: ends(
                |r| matches!(r, DisconnectReason::VersionMismatch { .. }),
                Some((CloseCode::VERSION_MISMATCH, "version")),
            ),
        },
        Case {
            name: "compressed_hello_bomb_is_refused_without_inflating_it",
            config: SocketConfig::default(),
            hello: false,
            steps: vec![Step::Send(raw_frame(1, &zlib(&hello_bomb)))],
            expect: ends(
                not_switchboard,
                Some((CloseCode::PROTOCOL_ERROR, "not a Switchboard peer")),
            ),
        },
        Case {
            name: "silent_peer_is_dropped_at_the_handshake_deadline",
            config: quick(),
            hello: false,
            steps: vec![Step::Wait(ms(600))],
            expect: ends(
                |r| matches!(r, DisconnectReason::HandshakeTimeout),
                Some((CloseCode::IDLE_TIMEOUT, "handshake")),
            ),
        },
        Case {
            name: "peer_that_goes_silent_is_dropped_after_idle_timeout",
            config: quick(),
            hello: true,
            steps: vec![Step::Wait(ms(800))],
            expect: ends(
                |r| matches!(r, DisconnectReason::IdleTimeout),
                Some((CloseCode::IDLE_TIMEOUT, "idle")),
            ),
        },
        Case {
            // Decided: time the owner leaves its events waiting is not the
            // peer's silence (the tokio driver's way; the core counted it).
            name: "an_owner_busy_past_the_idle_timeout_does_not_make_a_talking_peer_idle",
            config: SocketConfig {
                event_queue_len: 256,
                ..quick()
            },
            hello: true,
            steps: vec![
                Step::Send(talk),
                Step::Busy(ms(700)),
                Step::Wait(ms(100)),
                Step::Send(goodbye()),
            ],
            expect: Expect {
                errors: vec![],
                received: 600..=600,
                reason: closed_by_peer,
                close: None,
                pongs: 0..=0,
            },
        },
        Case {
            // Decided: only the latest ping needs its pong (the tokio
            // driver's way; the core answered each): a ping flood costs one
            // pong per write.
            name: "ping_flood_is_answered_with_coalesced_pongs",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![
                Step::Send(pings),
                Step::Wait(ms(100)),
                Step::Send(goodbye()),
            ],
            expect: Expect {
                errors: vec![],
                received: 0..=0,
                reason: closed_by_peer,
                close: None,
                pongs: 1..=10,
            },
        },
        Case {
            name: "a_peer_s_close_ends_the_connection_with_its_code_and_reason",
            config: SocketConfig::default(),
            hello: true,
            steps: vec![Step::Send([say("a"), say("b"), goodbye()].concat())],
            expect: Expect {
                errors: vec![],
                received: 2..=2,
                reason: closed_by_peer,
                close: None,
                pongs: 0..=0,
            },
        },
    ]
}
