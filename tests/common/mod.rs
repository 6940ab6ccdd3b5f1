//! Helpers shared by the integration tests: a raw peer that speaks the wire
//! format by hand (from docs/PROTOCOL.md, not from the library), and event
//! waiting with deadlines.
#![allow(dead_code)]

use std::time::Duration;

use switchboard::{
    BindScope, EndpointConfig, EndpointEvent, EndpointStream, SocketEvent, SocketStream,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

switchboard::channels! {
    /// Channels the tests use.
    pub enum Chan { Chat = 16, Data = 17, Nobody = 25 }
}
switchboard::actions! {
    /// Actions the tests use.
    pub enum Act { Say = 1, Seq = 2 }
}

/// How long any single wait in a test may take before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// A server on a free loopback port.
pub fn start_server(config: EndpointConfig) -> EndpointStream {
    EndpointStream::bind(BindScope::Loopback, 0, config).expect("bind loopback")
}

/// The hello frame, byte by byte: length 7, flags 0, "SWBD", version BE.
pub fn hello(version: u16) -> Vec<u8> {
    let mut bytes = vec![0, 0, 0, 7, 0, b'S', b'W', b'B', b'D'];
    bytes.extend_from_slice(&version.to_be_bytes());
    bytes
}

/// Reads one frame the hard way: (flags, body).
pub async fn read_raw_frame<S: AsyncRead + Unpin>(
    stream: &mut S,
) -> std::io::Result<(u8, Vec<u8>)> {
    let mut header = [0u8; 5];
    stream.read_exact(&mut header).await?;
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let mut body = vec![0u8; len - 1];
    stream.read_exact(&mut body).await?;
    Ok((header[4], body))
}

/// A raw frame with flags 0 around `payload`.
pub fn raw_frame(flags: u8, body: &[u8]) -> Vec<u8> {
    let mut bytes = ((body.len() + 1) as u32).to_be_bytes().to_vec();
    bytes.push(flags);
    bytes.extend_from_slice(body);
    bytes
}

/// Completes the handshake from the raw side: sends our hello, checks theirs.
pub async fn raw_handshake<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) {
    stream
        .write_all(&hello(switchboard::PROTOCOL_VERSION))
        .await
        .unwrap();
    let (flags, body) = read_raw_frame(stream).await.unwrap();
    assert_eq!(flags, 0);
    assert_eq!(&body[..4], b"SWBD");
}

/// Reads frames until a close frame (system channel 0, action 3) and returns
/// its (code, reason). Close content is bincode: varint u16 code, varint
/// length, UTF-8 bytes.
pub async fn read_close<S: AsyncRead + Unpin>(stream: &mut S) -> (u16, String) {
    loop {
        let (flags, body) = tokio::time::timeout(WAIT, read_raw_frame(stream))
            .await
            .expect("close frame in time")
            .expect("close frame before EOF");
        assert_eq!(flags, 0, "small system frames travel raw");
        if body.len() >= 2 && body[0] == 0 && body[1] == 3 {
            let (code, rest) = varint_u16(&body[2..]);
            let (len, rest) = varint_u16(rest);
            return (
                code,
                String::from_utf8(rest[..len as usize].to_vec()).unwrap(),
            );
        }
    }
}

/// Whether the server turned `stream` away at once, before it said a word:
/// its hello, then a close of code 1013 (try again later) whose reason ends
/// with a retry-after, within half a second.
pub async fn turned_away_at_once<S: AsyncRead + Unpin>(stream: &mut S) -> bool {
    let told = async {
        read_raw_frame(stream).await.ok()?;
        let (code, reason) = read_close(stream).await;
        Some(code == 1013 && switchboard::socket::retry_after_of(&reason).is_some())
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(500), told).await,
        Ok(Some(true))
    )
}

fn varint_u16(bytes: &[u8]) -> (u16, &[u8]) {
    match bytes[0] {
        0..=250 => (bytes[0] as u16, &bytes[1..]),
        251 => (u16::from_le_bytes([bytes[1], bytes[2]]), &bytes[3..]),
        other => panic!("unexpected varint marker {other}"),
    }
}

/// The next event of a socket stream, or a test failure after [`WAIT`].
pub async fn next_socket_event(stream: &mut SocketStream) -> SocketEvent {
    tokio::time::timeout(WAIT, stream.next_event())
        .await
        .expect("socket event in time")
        .expect("socket event stream ended early")
}

/// The next event of a server stream, or a test failure after [`WAIT`].
/// The next message the server receives, within the deadline (a
/// disconnection first fails the test).
pub async fn next_message(
    server: &mut EndpointStream,
) -> (switchboard::PeerId, switchboard::Message) {
    loop {
        match next_server_event(server).await {
            switchboard::EndpointEvent::Received(incoming) => {
                return (incoming.peer, incoming.message)
            }
            switchboard::EndpointEvent::PeerDisconnected { reason, .. } => {
                panic!("disconnected: {reason}")
            }
            _ => {}
        }
    }
}

pub async fn next_server_event(stream: &mut EndpointStream) -> EndpointEvent {
    tokio::time::timeout(WAIT, stream.next_event())
        .await
        .expect("server event in time")
        .expect("server event stream ended early")
}

/// Waits for the socket's `Connected`.
pub async fn expect_connected(stream: &mut SocketStream) {
    match next_socket_event(stream).await {
        SocketEvent::Connected => {}
        other => panic!("expected Connected, got {other:?}"),
    }
}

/// Waits for the socket's `Disconnected` (skipping messages and errors) and
/// returns the reason.
pub async fn expect_disconnected(stream: &mut SocketStream) -> switchboard::DisconnectReason {
    loop {
        if let SocketEvent::Disconnected(reason) = next_socket_event(stream).await {
            return reason;
        }
    }
}

/// A TCP forwarder between clients and a server whose connections can be cut
/// at once, as a network failure would: the client's next connection goes
/// through again.
pub struct Proxy {
    /// Where clients connect.
    pub addr: std::net::SocketAddr,
    cut: tokio::sync::watch::Sender<u64>,
}

impl Proxy {
    /// Forwards a fresh loopback port to `upstream`.
    pub fn start(upstream: std::net::SocketAddr) -> Proxy {
        let runtime = proxy_runtime();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, generation) = tokio::sync::watch::channel(0u64);
        runtime.spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut generation = generation.clone();
                let born = *generation.borrow();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = generation.wait_for(|g| *g != born) => {}
                    }
                });
            }
        });
        Proxy { addr, cut }
    }

    /// Drops every connection open now.
    pub fn cut(&self) {
        self.cut.send_modify(|g| *g += 1);
    }
}

fn proxy_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    })
}

/// A UDP forwarder in front of a server's QUIC port, that can go dark: a
/// QUIC client behind it loses its path as a player whose network dropped.
#[allow(dead_code)]
pub struct UdpProxy {
    /// Where clients send.
    pub addr: std::net::SocketAddr,
    dark: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

#[allow(dead_code)]
impl UdpProxy {
    /// Forwards a fresh loopback port to `upstream`: each client address
    /// gets a socket of its own towards it.
    pub fn start(upstream: std::net::SocketAddr) -> UdpProxy {
        use std::collections::HashMap;
        use std::sync::atomic::Ordering;
        use std::sync::Arc;
        let runtime = proxy_runtime();
        let front = Arc::new(
            runtime
                .block_on(tokio::net::UdpSocket::bind("127.0.0.1:0"))
                .unwrap(),
        );
        let addr = front.local_addr().unwrap();
        let dark = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let is_dark = dark.clone();
        runtime.spawn(async move {
            let mut backs: HashMap<std::net::SocketAddr, Arc<tokio::net::UdpSocket>> =
                HashMap::new();
            let mut buf = vec![0u8; 65536];
            while let Ok((n, from)) = front.recv_from(&mut buf).await {
                if is_dark.load(Ordering::Relaxed) {
                    continue;
                }
                let back = match backs.get(&from) {
                    Some(back) => back.clone(),
                    None => {
                        let back =
                            Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
                        back.connect(upstream).await.unwrap();
                        let (front, back2, dark) = (front.clone(), back.clone(), is_dark.clone());
                        tokio::spawn(async move {
                            let mut buf = vec![0u8; 65536];
                            while let Ok(n) = back2.recv(&mut buf).await {
                                if !dark.load(Ordering::Relaxed) {
                                    let _ = front.send_to(&buf[..n], from).await;
                                }
                            }
                        });
                        backs.insert(from, back.clone());
                        back
                    }
                };
                let _ = back.send(&buf[..n]).await;
            }
        });
        UdpProxy { addr, dark }
    }

    /// Drops every datagram from now on, both ways.
    pub fn go_dark(&self) {
        self.dark.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
