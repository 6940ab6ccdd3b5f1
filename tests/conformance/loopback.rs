//! The cases over loopback, whichever side of the tokio driver owns the
//! connection: a raw peer writes the case's steps by hand and reads all
//! the driver sends until the end of the stream.

use std::future::Future;
use std::time::Duration;

use switchboard::{SocketConfig, PROTOCOL_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Case, Outcome, Step};
use crate::common::{hello, WAIT};

/// The driver's side of a case: where its events come from.
pub trait Owner: Send + 'static {
    /// What it hears.
    type Event: Send;
    /// Its next event; `None` once it has none left.
    fn next(&mut self) -> impl Future<Output = Option<Self::Event>> + Send;
    /// What `event` adds to the outcome.
    fn take(outcome: &mut Outcome, event: Self::Event);
    /// Whether the peer failed its handshake without being announced (a
    /// server counts those rather than reporting them).
    fn failed_unannounced(&self) -> bool {
        false
    }
}

/// Runs every case, side by side (most wait on a timer), each on a fresh
/// pair that `open` makes: the driver's side and the raw peer's stream.
pub async fn run_all<O, F, Fut>(driver: &'static str, open: F)
where
    O: Owner,
    F: Fn(SocketConfig) -> Fut,
    Fut: Future<Output = (O, TcpStream)> + Send + 'static,
{
    let runs = super::cases::all().into_iter().map(|case| {
        let opening = open(case.config.clone());
        tokio::spawn(async move {
            let (owner, peer) = opening.await;
            play(&case, owner, peer).await.check(&case, driver);
        })
    });
    for run in futures::future::join_all(runs).await {
        if let Err(panic) = run {
            std::panic::resume_unwind(panic.into_panic());
        }
    }
}

/// The case's steps between `owner` and the raw `peer`, then until the end.
async fn play<O: Owner>(case: &Case, mut owner: O, peer: TcpStream) -> Outcome {
    let (mut read, mut write) = peer.into_split();
    let reading = tokio::spawn(async move {
        let mut bytes = Vec::new();
        let eof = tokio::time::timeout(WAIT, read.read_to_end(&mut bytes))
            .await
            .is_ok_and(|read| read.is_ok());
        (bytes, eof)
    });
    if case.hello {
        write.write_all(&hello(PROTOCOL_VERSION)).await.unwrap();
    }
    let mut outcome = Outcome::default();
    for step in &case.steps {
        match step {
            // The driver may close before it has read everything: a write
            // that fails is part of the case.
            Step::Send(bytes) => {
                let _ = tokio::time::timeout(WAIT, write.write_all(bytes)).await;
            }
            Step::HangUp => {
                let _ = write.shutdown().await;
            }
            Step::Wait(time) => {
                let until = tokio::time::Instant::now() + *time;
                while let Ok(Some(event)) = tokio::time::timeout_at(until, owner.next()).await {
                    O::take(&mut outcome, event);
                }
            }
            Step::Busy(time) => tokio::time::sleep(*time).await,
        }
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    while outcome.reason.is_none() {
        if !case.hello && owner.failed_unannounced() {
            outcome.unannounced = true;
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}: no end in time",
            case.name
        );
        match tokio::time::timeout(Duration::from_millis(20), owner.next()).await {
            Ok(Some(event)) => O::take(&mut outcome, event),
            Ok(None) => break,
            Err(_) => {}
        }
    }
    drop(write);
    let (bytes, eof) = tokio::time::timeout(WAIT + Duration::from_secs(1), reading)
        .await
        .expect("the peer's reader ends")
        .unwrap();
    outcome.read_peer_bytes(&bytes, eof);
    outcome
}
