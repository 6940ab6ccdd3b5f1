//! The cases on the tokio driver's server side: an `EndpointStream` (the
//! owner) a raw peer connects to. The server's connection runs the same
//! task as a client's, plus what only a server has (the address's shared
//! inflate budget, its gate); a peer that fails its handshake was never
//! announced, so it is heard as a counted failure (and read by the close
//! frame it got) rather than an event.

use switchboard::{EndpointConfig, EndpointEvent, EndpointStream, SocketConfig};
use tokio::net::TcpStream;

use super::loopback::Owner;
use super::Outcome;
use crate::common::start_server;

/// A server and a raw peer connected to it.
pub async fn open(socket: SocketConfig) -> (EndpointStream, TcpStream) {
    let owner = start_server(EndpointConfig {
        socket,
        ..EndpointConfig::default()
    });
    let peer = TcpStream::connect(owner.local_addr()).await.unwrap();
    (owner, peer)
}

impl Owner for EndpointStream {
    type Event = EndpointEvent;

    fn next(&mut self) -> impl std::future::Future<Output = Option<EndpointEvent>> + Send {
        self.next_event()
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

    fn failed_unannounced(&self) -> bool {
        self.handle().handshake_failures() > 0
    }
}
