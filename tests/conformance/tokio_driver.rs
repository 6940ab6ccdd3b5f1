//! The cases on the tokio driver's client side: a `SocketStream` (the
//! owner) facing a raw peer on loopback.

use switchboard::{SocketConfig, SocketEvent, SocketStream};
use tokio::net::{TcpListener, TcpStream};

use super::loopback::Owner;
use super::Outcome;

/// A client connection and the raw peer it reached.
pub async fn open(config: SocketConfig) -> (SocketStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let owner = SocketStream::connect(listener.local_addr().unwrap(), config);
    let (peer, _) = listener.accept().await.unwrap();
    (owner, peer)
}

impl Owner for SocketStream {
    type Event = SocketEvent;

    fn next(&mut self) -> impl std::future::Future<Output = Option<SocketEvent>> + Send {
        self.next_event()
    }

    fn take(outcome: &mut Outcome, event: SocketEvent) {
        match event {
            SocketEvent::Connected => {}
            SocketEvent::Received(_) => outcome.received += 1,
            SocketEvent::Error(error) => outcome.errors.push(error.to_string()),
            SocketEvent::Disconnected(reason) => outcome.reason = Some(reason),
        }
    }
}
