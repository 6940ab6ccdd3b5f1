//! One list of cases for a connection's rules, run twice: against
//! `ConnectionCore` in memory (the time passed in, advanced at once), and
//! against the tokio driver over loopback, as a client (a `SocketStream`
//! facing a raw peer that speaks the wire format by hand) and as a server
//! (an `EndpointStream` a raw peer connects to). A game loop on the core is
//! protected exactly as the tokio game is: a case that one side fails and
//! the other passes names a rule that exists twice.
//!
//! A module of `tests/attacks.rs` (one test binary fewer to link).

mod endpoint;
mod memory;
mod tokio_driver;

use std::io::Write;
use std::ops::RangeInclusive;
use std::time::Duration;

use switchboard::{CloseCode, DisconnectReason, SocketConfig, PROTOCOL_VERSION};

use super::common::{hello, raw_frame};

/// What the peer does, in order.
#[derive(Debug, Clone)]
pub enum Step {
    /// The peer writes these bytes.
    Send(Vec<u8>),
    /// The peer shuts its sending side down.
    HangUp,
    /// Time passes; the owner takes its events as they come.
    Wait(Duration),
    /// Time passes; the owner takes no events (its frame is long).
    Busy(Duration),
}

/// What must come of a case, on both drivers.
pub struct Expect {
    /// The `Error` events the owner hears, in order (a substring of each).
    pub errors: Vec<&'static str>,
    /// How many application messages the owner receives.
    pub received: RangeInclusive<usize>,
    /// The end the owner hears.
    pub reason: fn(&DisconnectReason) -> bool,
    /// The close the peer reads (its code, and a substring of its reason);
    /// `None`: no close frame reaches the peer.
    pub close: Option<(CloseCode, &'static str)>,
    /// Pongs the peer reads.
    pub pongs: RangeInclusive<usize>,
}

/// One case.
pub struct Case {
    pub name: &'static str,
    pub config: SocketConfig,
    /// Whether the peer sends its hello first.
    pub hello: bool,
    pub steps: Vec<Step>,
    pub expect: Expect,
}

/// What happened, as either runner saw it.
#[derive(Debug, Default)]
pub struct Outcome {
    pub errors: Vec<String>,
    pub received: usize,
    pub reason: Option<DisconnectReason>,
    /// The close frame the peer read: code and reason.
    pub close: Option<(u16, String)>,
    pub pongs: usize,
    /// The peer read our hello first.
    pub hello_first: bool,
    /// The peer read the end of the stream after everything.
    pub eof: bool,
    /// A server's peer that failed its handshake: never announced, only
    /// counted; its reason is the close frame the peer read.
    pub unannounced: bool,
}

impl Outcome {
    /// Reads what the peer received: our hello, then frames.
    pub fn read_peer_bytes(&mut self, mut bytes: &[u8], eof: bool) {
        let mut first = true;
        while bytes.len() >= 5 {
            let len = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
            if bytes.len() < 4 + len || len == 0 {
                break;
            }
            let body = &bytes[5..4 + len];
            if first {
                self.hello_first = body.starts_with(b"SWBD");
                first = false;
            } else if body.first() == Some(&0) && body.get(1) == Some(&2) {
                self.pongs += 1;
            } else if body.first() == Some(&0) && body.get(1) == Some(&3) {
                let close: switchboard::socket::CloseFrame =
                    switchboard::codec::decode_value(&body[2..]).expect("a close frame decodes");
                self.close = Some((close.code.0, close.reason));
            }
            bytes = &bytes[4 + len..];
        }
        self.eof = eof;
    }

    fn check(&self, case: &Case, driver: &str) {
        let name = format!("{} ({driver})", case.name);
        let expect = &case.expect;
        assert!(self.hello_first, "{name}: the peer reads our hello first");
        assert_eq!(
            self.errors.len(),
            expect.errors.len(),
            "{name}: errors {:?}",
            self.errors
        );
        for (got, want) in self.errors.iter().zip(&expect.errors) {
            assert!(got.contains(want), "{name}: error {got:?}, not {want:?}");
        }
        assert!(
            expect.received.contains(&self.received),
            "{name}: {} messages received, not {:?}",
            self.received,
            expect.received
        );
        if !self.unannounced {
            let reason = self
                .reason
                .as_ref()
                .unwrap_or_else(|| panic!("{name}: no end"));
            assert!((expect.reason)(reason), "{name}: ended {reason:?}");
        }
        match (&expect.close, &self.close) {
            (None, None) => {}
            (Some((code, text)), Some((got, reason))) => {
                assert_eq!(*got, code.0, "{name}: close {reason:?}");
                assert!(reason.contains(text), "{name}: close reason {reason:?}");
            }
            (want, got) => panic!("{name}: close {got:?}, expected {:?}", want),
        }
        assert!(
            expect.pongs.contains(&self.pongs),
            "{name}: {} pongs, not {:?}",
            self.pongs,
            expect.pongs
        );
        assert!(self.eof, "{name}: the peer reads the end after it all");
    }
}

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

/// The cases: the attacks of `tests/attacks.rs` that a connection answers
/// on its own, and the six rules the two drivers used to disagree on.
pub fn cases() -> Vec<Case> {
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
            expect: Expect {
                errors: vec![],
                received: 0..=0,
                reason: not_switchboard,
                close: Some((CloseCode::PROTOCOL_ERROR, "not a Switchboard peer")),
                pongs: 0..=0,
            },
        },
        Case {
            name: "wrong_version_is_refused_with_both_versions_named",
            config: SocketConfig::default(),
            hello: false,
            steps: vec![Step::Send(hello(PROTOCOL_VERSION + 1))],
            expect: Expect {
                errors: vec![],
                received: 0..=0,
                reason: |r| matches!(r, DisconnectReason::VersionMismatch { .. }),
                close: Some((CloseCode::VERSION_MISMATCH, "version")),
                pongs: 0..=0,
            },
        },
        Case {
            name: "compressed_hello_bomb_is_refused_without_inflating_it",
            config: SocketConfig::default(),
            hello: false,
            steps: vec![Step::Send(raw_frame(1, &zlib(&hello_bomb)))],
            expect: Expect {
                errors: vec![],
                received: 0..=0,
                reason: not_switchboard,
                close: Some((CloseCode::PROTOCOL_ERROR, "not a Switchboard peer")),
                pongs: 0..=0,
            },
        },
        Case {
            name: "silent_peer_is_dropped_at_the_handshake_deadline",
            config: quick(),
            hello: false,
            steps: vec![Step::Wait(ms(600))],
            expect: Expect {
                errors: vec![],
                received: 0..=0,
                reason: |r| matches!(r, DisconnectReason::HandshakeTimeout),
                close: Some((CloseCode::IDLE_TIMEOUT, "handshake")),
                pongs: 0..=0,
            },
        },
        Case {
            name: "peer_that_goes_silent_is_dropped_after_idle_timeout",
            config: quick(),
            hello: true,
            steps: vec![Step::Wait(ms(800))],
            expect: Expect {
                errors: vec![],
                received: 0..=0,
                reason: |r| matches!(r, DisconnectReason::IdleTimeout),
                close: Some((CloseCode::IDLE_TIMEOUT, "idle")),
                pongs: 0..=0,
            },
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

#[test]
fn every_case_holds_on_the_core_in_memory() {
    for case in cases() {
        memory::run(&case).check(&case, "ConnectionCore");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_holds_on_the_tokio_driver_over_loopback() {
    // The cases run side by side: most wait on a timer.
    let runs = cases().into_iter().map(|case| {
        tokio::spawn(async move {
            let outcome = tokio_driver::run(&case).await;
            outcome.check(&case, "tokio");
        })
    });
    for run in futures::future::join_all(runs).await {
        if let Err(panic) = run {
            std::panic::resume_unwind(panic.into_panic());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_holds_on_the_tokio_driver_s_server_side() {
    let runs = cases().into_iter().map(|case| {
        tokio::spawn(async move {
            let outcome = endpoint::run(&case).await;
            outcome.check(&case, "tokio server");
        })
    });
    for run in futures::future::join_all(runs).await {
        if let Err(panic) = run {
            std::panic::resume_unwind(panic.into_panic());
        }
    }
}
