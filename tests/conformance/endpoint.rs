//! The cases on the tokio driver's server side: an `EndpointStream` (the
//! owner) facing a raw peer that connects to it. The server's connection
//! runs the same task as a client's, plus what only a server has (the
//! address's shared inflate budget, its gate); a peer that fails its
//! handshake was never announced, so it is heard as a counted failure
//! rather than an event.

use std::time::Duration;

use switchboard::{EndpointConfig, EndpointEvent, PROTOCOL_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Case, Outcome, Step};
use crate::common::{hello, start_server, WAIT};

pub async fn run(case: &Case) -> Outcome {
    let config = EndpointConfig {
        socket: case.config.clone(),
        ..EndpointConfig::default()
    };
    let mut owner = start_server(config);
    let handle = owner.handle();
    let peer = TcpStream::connect(owner.local_addr()).await.unwrap();
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
    let deadline = tokio::time::Instant::now() + WAIT;
    while outcome.reason.is_none() {
        if !case.hello && handle.handshake_failures() > 0 {
            // Never announced: the failure is counted, its reason is the
            // one the peer reads in the close frame (checked there).
            outcome.unannounced = true;
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}: no end in time",
            case.name
        );
        if let Ok(Some(event)) =
            tokio::time::timeout(Duration::from_millis(20), owner.next_event()).await
        {
            take(&mut outcome, event);
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

fn take(outcome: &mut Outcome, event: EndpointEvent) {
    match event {
        EndpointEvent::PeerConnected { .. } => {}
        EndpointEvent::Received(_) => outcome.received += 1,
        EndpointEvent::PeerError { error, .. } => outcome.errors.push(error.to_string()),
        EndpointEvent::PeerDisconnected { reason, .. } => outcome.reason = Some(reason),
        _ => {}
    }
}
