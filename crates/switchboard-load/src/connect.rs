//! How the load testers connect: over TCP (with TLS), WebSocket or QUIC,
//! each client from a loopback address of its own against a server on
//! loopback, as players come from many homes.

use std::net::SocketAddr;

use switchboard::socket::{SocketConfig, SocketStream};

/// Bots that share one source address when the relay is on loopback.
const BOTS_PER_ADDRESS: usize = 4;

/// Where bot `index` connects from: against a relay on IPv4 loopback, the
/// bots spread over the loopback network (127.0.x.y), a few per address,
/// as players come from many homes; the relay's per-address limits then
/// apply as they would in production. Elsewhere, the system's choice.
pub fn source_address(index: usize, relay: SocketAddr) -> Option<SocketAddr> {
    if !(relay.is_ipv4() && relay.ip().is_loopback()) {
        return None;
    }
    let host = index / BOTS_PER_ADDRESS;
    let ip = std::net::Ipv4Addr::new(
        127,
        1 + (host / 250 / 256) as u8,
        (host / 250 % 256) as u8,
        2 + (host % 250) as u8,
    );
    Some(SocketAddr::new(ip.into(), 0))
}

/// Connects to `to` from the local address `from` (no delay on).
pub async fn connect_from(
    from: SocketAddr,
    to: SocketAddr,
) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(from)?;
    let stream = socket.connect(to).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// How a load client connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// TCP, with TLS when the tester has a TLS client.
    Tcp,
    /// WebSocket over TCP (plain only).
    WebSocket,
    /// QUIC (TLS 1.3 by construction).
    Quic,
}

/// Load client `index`'s connection to `to` over `via`, from a loopback
/// address of its own against a server on loopback
/// ([`source_address`]); TLS under TCP when `tls` is given (the server
/// checked by its trust). `None`, with a warning logged, when it could not
/// connect.
pub async fn open(
    index: usize,
    to: SocketAddr,
    via: Via,
    tls: Option<&switchboard::tls::TlsClient>,
) -> Option<SocketStream> {
    let config = SocketConfig::default();
    if via == Via::Quic {
        // From a loopback address of its own, as over TCP.
        let dialer = switchboard::socket::Dialer::default();
        let dialer = match tls {
            Some(tls) => dialer.with_tls(tls.clone()),
            None => dialer,
        };
        let server = to.to_string();
        let opening = match source_address(index, to) {
            Some(from) => dialer.open_quic_from(&server, &config, from.ip()),
            None => dialer.open_quic(&server, &config),
        };
        return Some(switchboard::Socket::connect_with(opening, config).into_stream());
    }
    let websocket = via == Via::WebSocket;
    let url = format!("ws://{to}/");
    let connected = match source_address(index, to) {
        Some(from) => connect_from(from, to).await,
        None => tokio::net::TcpStream::connect(to).await,
    };
    let stream = match connected {
        Ok(stream) => stream,
        Err(err) => {
            tracing::warn!(bot = index, %to, %err, "load bot could not connect");
            return None;
        }
    };
    let _ = stream.set_nodelay(true);
    match (tls, websocket) {
        (None, true) => Some(SocketStream::connect_ws_over(&url, stream, config)),
        (None, false) => Some(SocketStream::from_stream(stream, config)),
        (Some(_), true) => {
            tracing::warn!(
                bot = index,
                "the load tester speaks TLS over TCP only, not wss://"
            );
            None
        }
        (Some(tls), false) => {
            // The handshake inside the connection's opening: a busy server
            // that turns the client away before TLS (in plaintext) is heard
            // as a close with its retry-after, which `admitted` waits out.
            let (tls, server) = (tls.clone(), to.to_string());
            let opening: switchboard::socket::Opening = Box::pin(async move {
                let (stream, _) = tls.handshake(stream, &server).await?;
                Ok(switchboard::socket::Transport::Stream(Box::new(stream)))
            });
            Some(switchboard::Socket::connect_with(opening, config).into_stream())
        }
    }
}

/// Attempts a load client makes to join a server that turns it away for
/// now.
const JOIN_ATTEMPTS: u32 = 10;

/// [`open`], then the connection once it is open: a server busy with
/// handshakes (many clients behind one address) asks some to come back
/// later, and they do, up to 10 attempts. Why not, when it did not open.
pub async fn admitted(
    index: usize,
    to: SocketAddr,
    via: Via,
    tls: Option<&switchboard::tls::TlsClient>,
) -> Result<SocketStream, String> {
    let reopen = || open(index, to, via, tls);
    let first = reopen().await.ok_or("could not connect")?;
    first
        .until_admitted(reopen, JOIN_ATTEMPTS)
        .await
        .map_err(|reason| reason.to_string())
}
