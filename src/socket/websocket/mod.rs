//! WebSocket: the same frames and sessions for browsers and other WebSocket
//! clients.
//!
//! Each Switchboard frame travels as one binary WebSocket message, unchanged:
//! its 4-byte length and its flag byte included. One decoder reads both
//! transports; a WebSocket client builds exactly the bytes a TCP client
//! writes, one frame per message. Past the HTTP upgrade, a WebSocket
//! connection runs the very task a TCP connection runs (handshake,
//! keep-alive, limits, close codes, slow-consumer rules), so a server's logic
//! cannot tell the two kinds of client apart.
//!
//! ```text
//!   TCP stream ──▶ HTTP upgrade (http.rs) ──▶ tungstenite ──▶ FrameStream / FrameSink
//!                  GET of a page: served,                       (one binary message
//!                  then closed                                   = one frame)
//! ```
//!
//! tokio-tungstenite speaks the WebSocket framing; the HTTP part (upgrade,
//! origin check, static pages) is ours, so that the accept loop, its
//! per-address limits and its timeouts are the TCP listener's own.

mod http;

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use futures::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::{self, Message as WsMessage};
use tokio_tungstenite::WebSocketStream;

use crate::codec::{CodecConfig, HEADER_LEN};
use crate::socket::TurnedAway;

pub use http::{accept_upgrade, forbid, Upgrade, MAX_HEADERS};

/// The WebSocket listener of a server, beside its TCP one
/// ([`EndpointConfig::websocket`](super::EndpointConfig::websocket)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSocketConfig {
    /// Port to listen on, on the same interfaces as the TCP port; 0 picks a
    /// free one (read it with `EndpointHandle::websocket_addr`).
    pub port: u16,
    /// Origins a browser may connect from, e.g. `https://game.example`
    /// (default empty: any). A request whose `Origin` header is not in a
    /// non-empty list is answered 403 and closed. Requests without an
    /// `Origin` (native programs, node) are not browsers and are let in: the
    /// check protects players' browsers from other sites, it does not
    /// authenticate anyone.
    pub allowed_origins: Vec<String>,
    /// Bytes of an HTTP request head (default 8 KiB). A longer head is
    /// answered 431 and closed. The head must arrive within the socket's
    /// `handshake_timeout`, and the connection counts as a pending
    /// handshake (with the TCP listener's per-address limits) until its
    /// Switchboard hello.
    pub max_request_head: usize,
    /// Pages served to a plain `GET` on this port (a browser demo, a game's
    /// web build). Any other path gets 404; a WebSocket upgrade is accepted
    /// on any path.
    pub pages: Vec<WebPage>,
}

impl Default for WebSocketConfig {
    fn default() -> Self {
        Self {
            port: 0,
            allowed_origins: Vec::new(),
            max_request_head: 8 * 1024,
            pages: Vec::new(),
        }
    }
}

impl WebSocketConfig {
    /// A listener on `port` with the default limits and no pages.
    pub fn on_port(port: u16) -> Self {
        Self {
            port,
            ..Self::default()
        }
    }

    /// Adds a page served at `path` (e.g. `"/"`).
    pub fn with_page(mut self, path: &str, content_type: &str, body: impl Into<Bytes>) -> Self {
        self.pages.push(WebPage {
            path: path.to_string(),
            content_type: content_type.to_string(),
            body: body.into(),
        });
        self
    }
}

/// A static page a WebSocket listener serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebPage {
    /// The path, without query (`"/"`, `"/client.js"`).
    pub path: String,
    /// Its `Content-Type`.
    pub content_type: String,
    /// Its bytes.
    pub body: Bytes,
}

/// The limits of the one server-side WebSocket handshake
/// ([`accept_upgrade`]) and of the connection it makes, whoever listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeRules {
    /// Bytes of an HTTP request head; a longer one is answered 431.
    pub max_request_head: usize,
    /// Browser origins (`Origin` headers) allowed to upgrade: `None` any,
    /// `Some` only those listed (an empty list: no browser at all). A
    /// request without an `Origin` (a native program) is not a browser and
    /// is let in. Refused with 403.
    pub allowed_origins: Option<Vec<String>>,
    /// The largest message (and WebSocket frame) the connection carries.
    pub max_message: usize,
    /// Pages served to a plain `GET`; any other path gets 404.
    pub pages: Vec<WebPage>,
    /// What `GET /webtransport` answers, when the server's QUIC port
    /// speaks WebTransport: how a page served here reaches it.
    pub webtransport: Option<crate::socket::quic::webtransport::WebTransportOffer>,
}

impl UpgradeRules {
    /// A game server's WebSocket port's: `config`'s limits, messages of one
    /// frame of `codec` each.
    pub fn of(config: &WebSocketConfig, codec: &CodecConfig) -> Self {
        Self {
            max_request_head: config.max_request_head,
            allowed_origins: (!config.allowed_origins.is_empty())
                .then(|| config.allowed_origins.clone()),
            max_message: codec.max_frame_len.saturating_add(HEADER_LEN),
            pages: config.pages.clone(),
            webtransport: None,
        }
    }

    /// The rules tungstenite applies to the connection: messages no longer
    /// than `max_message`, a small read buffer for idle connections.
    pub(crate) fn tungstenite(&self) -> tungstenite::protocol::WebSocketConfig {
        tungstenite::protocol::WebSocketConfig::default()
            .read_buffer_size(4 * 1024)
            .write_buffer_size(64 * 1024)
            .max_message_size(Some(self.max_message))
            .max_frame_size(Some(self.max_message))
    }
}

/// The rules tungstenite applies to a client connection carrying frames of
/// `codec`.
pub(crate) fn tungstenite_config(codec: &CodecConfig) -> tungstenite::protocol::WebSocketConfig {
    let rules = UpgradeRules {
        max_request_head: 0,
        allowed_origins: None,
        max_message: codec.max_frame_len.saturating_add(HEADER_LEN),
        pages: Vec::new(),
        webtransport: None,
    };
    rules.tungstenite()
}

/// A WebSocket broke the rules of this transport: a text message, a
/// message that is not exactly one frame, bad WebSocket framing. The reader
/// reports it as a protocol error (close code 1002), not as a lost
/// connection.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct TransportViolation(pub(crate) String);

impl TransportViolation {
    /// The violation inside an I/O error, if that is what it carries.
    pub(crate) fn of(err: &io::Error) -> Option<&TransportViolation> {
        err.get_ref()?.downcast_ref::<TransportViolation>()
    }
}

fn violation(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, TransportViolation(what.into()))
}

/// A tungstenite error as the connection task sees it: I/O as I/O, a closed
/// connection as the end of the stream, anything else as a violation.
fn io_error(err: tungstenite::Error) -> io::Error {
    match err {
        tungstenite::Error::Io(err) => err,
        tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => {
            io::Error::new(io::ErrorKind::ConnectionReset, "the WebSocket is closed")
        }
        other => violation(format!("bad WebSocket traffic: {other}")),
    }
}

/// A WebSocket as the byte stream a connection task runs on. Reading gives
/// the bytes of each binary message in order, each checked to hold exactly
/// one frame; bytes written (the connection's writer only writes whole
/// frames, several at once or one in pieces) leave one frame per binary
/// message.
pub(crate) struct FrameStream<S> {
    ws: WebSocketStream<S>,
    /// What is left of the message being read.
    current: Bytes,
    /// Bytes of a frame being written, not yet whole.
    pending: BytesMut,
}

impl<S> FrameStream<S> {
    pub(crate) fn new(ws: WebSocketStream<S>) -> Self {
        Self {
            ws,
            current: Bytes::new(),
            pending: BytesMut::new(),
        }
    }

    /// The length of the whole frame at the start of `pending`, if it is
    /// there.
    fn whole_frame(&self) -> Option<usize> {
        this_frame_len(&self.pending).filter(|&len| self.pending.len() >= len)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for FrameStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if !self.current.is_empty() {
                let n = self.current.len().min(buf.remaining());
                buf.put_slice(&self.current[..n]);
                self.current.advance(n);
                return Poll::Ready(Ok(()));
            }
            let message = match ready!(Pin::new(&mut self.ws).poll_next(cx)) {
                // The peer's close handshake, or the end of the stream.
                None => return Poll::Ready(Ok(())),
                Some(Err(err)) => return Poll::Ready(Err(io_error(err))),
                Some(Ok(message)) => message,
            };
            match message {
                WsMessage::Binary(bytes) => {
                    check_one_frame(&bytes)?;
                    self.current = bytes;
                }
                WsMessage::Close(_) => return Poll::Ready(Ok(())),
                // tungstenite answers pings itself.
                WsMessage::Ping(_) | WsMessage::Pong(_) | WsMessage::Frame(_) => {}
                WsMessage::Text(_) => {
                    return Poll::Ready(Err(violation(
                        "a text WebSocket message: Switchboard frames travel as binary messages",
                    )))
                }
            }
        }
    }
}

/// A binary message must be one whole frame: its length field counts the
/// rest of the message exactly.
fn check_one_frame(message: &[u8]) -> io::Result<()> {
    if message.len() < HEADER_LEN {
        return Err(violation(format!(
            "a WebSocket message of {} bytes is shorter than a frame header",
            message.len()
        )));
    }
    let declared = this_frame_len(message).unwrap_or_default() - 4;
    if declared != message.len() - 4 {
        return Err(violation(format!(
            "a WebSocket message must hold exactly one frame: its length field says {declared} \
             bytes follow, the message has {}",
            message.len() - 4
        )));
    }
    Ok(())
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for FrameStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        // Not a `SplitSink`: it holds one message until the next
        // `poll_ready`, and a second `start_send` would replace it. The
        // stream itself buffers every message it is given. Waits while
        // tungstenite's buffer is over its size: the connection's
        // outbound queue, not this buffer, holds what the peer has not read.
        ready!(Pin::new(&mut self.ws).poll_ready(cx)).map_err(io_error)?;
        let this = &mut *self;
        if this.pending.is_empty() && this_frame_len(buf) == Some(buf.len()) {
            // The common case: exactly one frame, sent without a copy into
            // `pending`.
            let message = WsMessage::Binary(Bytes::copy_from_slice(buf));
            Pin::new(&mut this.ws)
                .start_send(message)
                .map_err(io_error)?;
            return Poll::Ready(Ok(buf.len()));
        }
        this.pending.extend_from_slice(buf);
        while let Some(len) = this.whole_frame() {
            let frame = this.pending.split_to(len).freeze();
            Pin::new(&mut this.ws)
                .start_send(WsMessage::Binary(frame))
                .map_err(io_error)?;
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.ws).poll_flush(cx).map_err(io_error)
    }

    /// Sends the WebSocket close (code 1000; the Switchboard close frame
    /// with the real code and reason went just before it).
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.ws).poll_close(cx).map_err(io_error)
    }
}

/// The length of the frame that starts `buf`, header included.
fn this_frame_len(buf: &[u8]) -> Option<usize> {
    let header = buf.get(..4)?;
    Some(4 + u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize)
}

/// A `ws://host:port/path` or `wss://host:port/path` address split into
/// what connecting needs.
pub(crate) struct WsUrl {
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl WsUrl {
    /// Parses `url` (`ws://`, default port 80, or `wss://`, 443).
    pub(crate) fn parse(url: &str) -> io::Result<Self> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_string());
        let (rest, secure) = match (url.strip_prefix("ws://"), url.strip_prefix("wss://")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) => (rest, true),
            _ => return Err(invalid("a WebSocket address starts with ws:// or wss://")),
        };
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        // `host`, `host:port`, `[v6]` or `[v6]:port`.
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((host, "")) => (host, None),
                Some((host, rest)) => (host, Some(rest.strip_prefix(':').unwrap_or(rest))),
                None => return Err(invalid("unclosed [ in ws:// address")),
            },
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        let port = match port {
            Some(port) => port
                .parse()
                .map_err(|_| invalid("bad port in ws:// address"))?,
            None if secure => 443,
            None => 80,
        };
        if host.is_empty() {
            return Err(invalid("no host in ws:// address"));
        }
        Ok(Self {
            host: host.to_string(),
            port,
        })
    }

    /// `host:port`, as TLS and known hosts name the server.
    pub(crate) fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Opens a client WebSocket over `stream` to `url`.
pub(crate) async fn client_handshake<S>(
    url: &str,
    stream: S,
    codec: &CodecConfig,
) -> io::Result<WebSocketStream<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let config = tungstenite_config(codec);
    let (ws, _response) = tokio_tungstenite::client_async_with_config(url, stream, Some(config))
        .await
        .map_err(|err| match err {
            tungstenite::Error::Io(err) => err,
            tungstenite::Error::Http(response) if response.status() == 503 => {
                io::Error::other(TurnedAway::from_response(&response))
            }
            // The server's words with its status (a 403 says why: plaintext
            // from another machine at a port that speaks only TLS to it).
            tungstenite::Error::Http(response) => {
                let body = response
                    .body()
                    .as_deref()
                    .map(String::from_utf8_lossy)
                    .unwrap_or_default();
                io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    format!("the server answered {}: {body}", response.status()),
                )
            }
            other => io::Error::new(io::ErrorKind::ConnectionRefused, other.to_string()),
        })?;
    Ok(ws)
}

/// A WebSocket listener's "503 Service Unavailable" with its
/// `Retry-After`: the server turned the connection away for now, as it
/// does a TCP one with a close of code `SERVER_FULL`.
impl TurnedAway {
    fn from_response(response: &tungstenite::http::Response<Option<Vec<u8>>>) -> Self {
        let seconds = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(1);
        let body = response
            .body()
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        let body = if body.is_empty() {
            "service unavailable".into()
        } else {
            body
        };
        Self {
            why: switchboard_proto::reason::with_retry_after(
                &body,
                std::time::Duration::from_secs(seconds),
            ),
        }
    }
}

#[cfg(test)]
mod tests;
