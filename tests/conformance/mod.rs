//! One list of cases for a connection's rules, run twice: against
//! `ConnectionCore` in memory (the time passed in, advanced at once), and
//! against the tokio driver over loopback, as a client (a `SocketStream`
//! facing a raw peer that speaks the wire format by hand) and as a server
//! (an `EndpointStream` a raw peer connects to). A game loop on the core is
//! protected exactly as the tokio game is: a case that one side fails and
//! the other passes names a rule that exists twice.
//!
//! A module of the root crate's test binary (`tests/all/main.rs`), beside
//! `attacks`.

mod cases;
mod endpoint;
mod loopback;
mod memory;
mod tokio_driver;

use std::ops::RangeInclusive;
use std::time::Duration;

use switchboard::{CloseCode, DisconnectReason, SocketConfig};

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

#[test]
fn every_case_holds_on_the_core_in_memory() {
    for case in cases::all() {
        memory::run(&case).check(&case, "ConnectionCore");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_holds_on_the_tokio_driver_over_loopback() {
    loopback::run_all("tokio client", tokio_driver::open).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_holds_on_the_tokio_driver_s_server_side() {
    loopback::run_all("tokio server", endpoint::open).await;
}
