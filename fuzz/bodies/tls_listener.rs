//! The first bytes a listener that speaks TLS reads from another peer: a
//! real server beyond loopback (the game's TCP port, TLS with its own
//! identity) is sent the input over a real connection from this machine,
//! then the peer hangs up. Whatever the bytes (a ClientHello cut or bent,
//! a plain hello, an HTTP request, noise), the server must end the
//! connection within its handshake timeout, without a panic, and keep
//! serving. Shared by the fuzz target and the corpus replay test.

use std::sync::OnceLock;
use std::time::Duration;

use switchboard::tls::{ServerIdentity, TlsServer, TlsSettings};
use switchboard::{BindScope, EndpointConfig, EndpointStream, SocketConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One server for every input: its port.
fn server() -> u16 {
    static SERVER: OnceLock<(EndpointStream, u16)> = OnceLock::new();
    let (_, port) = SERVER.get_or_init(|| {
        let identity = ServerIdentity::generate().expect("an identity");
        let config = EndpointConfig {
            tls: TlsSettings::serving(TlsServer::new(&identity).expect("TLS settings")),
            socket: SocketConfig {
                handshake_timeout: Duration::from_millis(500),
                ..SocketConfig::default()
            },
            max_pending_handshakes_per_address: 1024,
            max_connections_per_address: 1024,
            ..EndpointConfig::default()
        };
        let server = EndpointStream::bind(BindScope::AllInterfaces, 0, config).expect("bind");
        let port = server.local_addr().port();
        (server, port)
    });
    *port
}

pub fn run(data: &[u8]) {
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    let port = server();
    let data = data.to_vec();
    switchboard::runtime::handle().block_on(async move {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("the server listens");
        // Bit 0 set: the input follows a TLS record header, so that more
        // inputs reach rustls's parser than its first byte's check.
        if mode & 1 == 1 {
            let _ = stream.write_all(&[0x16, 0x03, 0x01]).await;
        }
        let _ = stream.write_all(&data).await;
        // Bit 1 set: the peer then hangs up; else it waits (the server's
        // handshake timeout ends it).
        if mode & 2 == 2 {
            let _ = stream.shutdown().await;
        }
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            let mut sink = [0u8; 4096];
            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        })
        .await;
        assert!(ended.is_ok(), "the server did not end the connection");
    });
}
