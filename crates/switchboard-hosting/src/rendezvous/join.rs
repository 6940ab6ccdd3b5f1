//! A player's side of the join-code relay: `CODE@relay:port` dialed as the
//! relay wants it (its join frame first), then TLS with the host, end to
//! end inside the pipe (the relay pipes records it cannot read), then the
//! game's own protocol.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use super::frames::Frame;
use switchboard::socket::{Connector, Dialer, Opening, Transport};
use switchboard::tls::TlsClient;
use switchboard_proto::join_code::split_join_addr;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// The connector for `CODE@host:port`: a game hosted through the join-code
/// relay at `host:port`.
///
/// ```no_run
/// use switchboard::{ClientConfig, NetworkClient};
/// let client = NetworkClient::connect_via(
///     switchboard_hosting::JoinCodes::dialer(),
///     "K7PQ2MXB@relay.example:7400",
///     ClientConfig::named("ann"),
/// );
/// ```
///
/// The host is checked by the dialer's trust, the address `CODE@host:port`
/// its name in the known-hosts file; pin the fingerprint the host shows
/// (`Dialer::trust(ServerTrust::pinned(..))`, the game's `--trust`) so
/// that not even the relay can pose as the host.
#[derive(Debug, Clone, Copy, Default)]
pub struct JoinCodes;

impl JoinCodes {
    /// A dialer that knows join codes besides the socket's own forms.
    pub fn dialer() -> Dialer {
        Dialer::default().with(JoinCodes)
    }
}

impl Connector for JoinCodes {
    fn accepts(&self, addr: &str) -> bool {
        split_join_addr(addr).is_some()
    }

    fn open(&self, addr: &str, tls: Option<&TlsClient>) -> Opening {
        let target = split_join_addr(addr).map(|(code, relay)| {
            let join = Frame::Join {
                code: code.to_string(),
            }
            .encode();
            (join, relay.to_string())
        });
        let (addr, tls) = (addr.to_string(), tls.cloned());
        Box::pin(async move {
            let (join, relay) = target.ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a CODE@host:port")
            })?;
            let mut stream = TcpStream::connect(relay).await?;
            let _ = stream.set_nodelay(true);
            stream.write_all(&join).await?;
            let Some(tls) = tls else {
                return Ok(stream.into());
            };
            // The first bytes read are kept: if the relay refused the join
            // (in the game's words: a hello and a close) where the host's
            // TLS was due, the player is told what it said.
            let first = Arc::new(Mutex::new(Vec::new()));
            let recorded = Recorded {
                inner: stream,
                first: first.clone(),
            };
            match tls.handshake(recorded, &addr).await {
                Ok((stream, _)) => Ok(Transport::Stream(Box::new(stream))),
                Err(err) => {
                    let first = first.lock().unwrap_or_else(|e| e.into_inner());
                    Err(relays_refusal(&first).unwrap_or(err))
                }
            }
        })
    }
}

/// Bytes of a join's first reply kept, to read a refusal from.
const KEPT: usize = 1024;

/// A stream that keeps a copy of the first [`KEPT`] bytes read from it.
struct Recorded {
    inner: TcpStream,
    first: Arc<Mutex<Vec<u8>>>,
}

impl AsyncRead for Recorded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = &buf.filled()[before..];
        if !read.is_empty() {
            let mut first = self.first.lock().unwrap_or_else(|e| e.into_inner());
            let room = KEPT.saturating_sub(first.len());
            first.extend_from_slice(&read[..read.len().min(room)]);
        }
        polled
    }
}

impl AsyncWrite for Recorded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The relay's refusal in `bytes` (a hello, then a close frame), as the
/// error a player reads: `None` if that is not what they are.
fn relays_refusal(bytes: &[u8]) -> Option<std::io::Error> {
    let hello = bytes.get(..11)?;
    if hello[5..9] != switchboard::socket::MAGIC {
        return None;
    }
    let rest = &bytes[11..];
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let body = rest.get(4..4 + len)?;
    let (0, payload) = body.split_first()? else {
        return None;
    };
    let message = switchboard::Message::decode(bytes::Bytes::copy_from_slice(payload)).ok()?;
    let close: switchboard::socket::CloseFrame = message.content().ok()?;
    Some(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        format!(
            "the join-code relay refused: {} ({})",
            close.reason, close.code
        ),
    ))
}
