//! The cases on the tokio driver: a `SocketStream` (the owner) facing a raw
//! peer on loopback that writes the case's bytes by hand and reads
//! everything the driver sends until the end of the stream.

use std::time::Duration;

use switchboard::{SocketEvent, SocketStream, PROTOCOL_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::{Case, Outcome, Step};
use crate::common::{hello, WAIT};

pub async fn run(case: &Case) -> Outcome {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut owner = SocketStream::connect(listener.local_addr().unwrap(), case.config.clone());
    let (peer, _) = listener.accept().await.unwrap();
    let (mut read, mut write) = peer.into_split();
    let reading = tokio::spawn(async move {
        let mut bytes = Vec::new();
        let eof = tokio::time::timeout(WAIT, read.read_to_end(&mut bytes))
            .await
            .is_ok();
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
                while let Ok(Some(event)) = tokio::time::timeout_at(until, owner.next_event()).await
                {
                    take(&mut outcome, event);
                }
            }
            Step::Busy(time) => tokio::time::sleep(*time).await,
        }
    }
    while outcome.reason.is_none() {
        let event = tokio::time::timeout(WAIT, owner.next_event())
            .await
            .unwrap_or_else(|_| panic!("{}: no end in time", case.name));
        match event {
            Some(event) => take(&mut outcome, event),
            None => break,
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

fn take(outcome: &mut Outcome, event: SocketEvent) {
    match event {
        SocketEvent::Connected => {}
        SocketEvent::Received(_) => outcome.received += 1,
        SocketEvent::Error(error) => outcome.errors.push(error.to_string()),
        SocketEvent::Disconnected(reason) => outcome.reason = Some(reason),
    }
}
