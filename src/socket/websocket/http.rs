//! The server side of every WebSocket upgrade in the project (the game's
//! WebSocket port, the AxisPy port, the join-code relay's players): one
//! request head per connection, read within [`UpgradeRules`], then either
//! the upgrade to a WebSocket, a page, or an error status; nothing else is
//! spoken.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::WebSocketStream;

use super::UpgradeRules;

/// Headers a request may carry; more is answered 431.
pub const MAX_HEADERS: usize = 32;

/// How a connection (a TCP stream, or a TLS session over one) went past
/// its HTTP request.
#[derive(Debug)]
pub enum Upgrade<S = TcpStream> {
    /// Upgraded to a WebSocket; `path` is the request's, query included.
    WebSocket {
        /// The upgraded connection.
        ws: Box<WebSocketStream<S>>,
        /// The path it asked for (a room, a join code), query included.
        path: String,
    },
    /// A page was served; the connection ends.
    Served,
    /// Answered with an error status and closed; why, for the log.
    Refused(&'static str),
}

/// Reads one request head from `stream` and answers it by `rules`: a
/// `GET` upgrade (version 13, an allowed `Origin`) becomes a WebSocket, a
/// plain `GET` of one of the pages is served, anything else gets its error
/// status (a head past `max_request_head` or with more than
/// [`MAX_HEADERS`] headers 431, a refused origin 403). The caller bounds the
/// time this takes (its handshake timeout: a slow client is dropped).
pub async fn accept_upgrade<S>(mut stream: S, rules: &UpgradeRules) -> io::Result<Upgrade<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let config = rules;
    let mut head = Vec::with_capacity(1024.min(config.max_request_head));
    let (path, key, leftover) = loop {
        let room = config.max_request_head.saturating_sub(head.len());
        if room == 0 {
            return answer(
                &mut stream,
                Status::HEAD_TOO_LARGE,
                "request head too large",
            )
            .await;
        }
        let before = head.len();
        head.resize(before + room.min(4096), 0);
        let n = stream.read(&mut head[before..]).await?;
        head.truncate(before + n);
        if n == 0 {
            return Ok(Upgrade::Refused("hung up inside its request"));
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&head) {
            Ok(httparse::Status::Partial) => continue,
            Ok(httparse::Status::Complete(len)) => match route(&request, config) {
                Route::Upgrade(key) => {
                    let path = request.path.unwrap_or("/").to_string();
                    break (path, key, head[len..].to_vec());
                }
                Route::WebTransport(offer) => {
                    let json = offer.json();
                    respond(
                        &mut stream,
                        Status::OK,
                        "application/json",
                        &[],
                        json.as_bytes(),
                    )
                    .await?;
                    return Ok(Upgrade::Served);
                }
                Route::Page(index) => {
                    let page = &config.pages[index];
                    respond(&mut stream, Status::OK, &page.content_type, &[], &page.body).await?;
                    return Ok(Upgrade::Served);
                }
                Route::Refuse(status, why) => return answer(&mut stream, status, why).await,
            },
            Err(httparse::Error::TooManyHeaders) => {
                return answer(&mut stream, Status::HEAD_TOO_LARGE, "too many headers").await
            }
            Err(_) => return answer(&mut stream, Status::BAD_REQUEST, "not an HTTP request").await,
        }
    };
    let accept = derive_accept_key(key.as_bytes());
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    stream.write_all(response.as_bytes()).await?;
    tracing::trace!(%path, "upgraded to WebSocket");
    let config = rules.tungstenite();
    let ws =
        WebSocketStream::from_partially_read(stream, leftover, Role::Server, Some(config)).await;
    Ok(Upgrade::WebSocket {
        ws: Box::new(ws),
        path,
    })
}

/// What a request asks for.
enum Route<'a> {
    /// A valid upgrade, with its `Sec-WebSocket-Key`.
    Upgrade(String),
    /// The page at this index of `config.pages`.
    Page(usize),
    /// `/webtransport`: how to reach the server's WebTransport.
    WebTransport(&'a crate::socket::WebTransportOffer),
    Refuse(Status, &'static str),
}

fn route<'a>(request: &httparse::Request<'_, '_>, config: &'a UpgradeRules) -> Route<'a> {
    if request.method != Some("GET") {
        return Route::Refuse(Status::METHOD_NOT_ALLOWED, "only GET is served");
    }
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(str::trim)
    };
    let upgrade = header("upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if !upgrade {
        let path = request.path.unwrap_or("/");
        let path = path.split('?').next().unwrap_or(path);
        if let (Some(offer), "/webtransport") = (&config.webtransport, path) {
            return Route::WebTransport(offer);
        }
        return match config.pages.iter().position(|page| page.path == path) {
            Some(index) => Route::Page(index),
            None => Route::Refuse(Status::NOT_FOUND, "no such page"),
        };
    }
    let connection_upgrade = header("connection").is_some_and(|v| {
        v.split(',')
            .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
    });
    if !connection_upgrade || request.version != Some(1) {
        return Route::Refuse(Status::BAD_REQUEST, "malformed WebSocket upgrade");
    }
    if header("sec-websocket-version") != Some("13") {
        return Route::Refuse(Status::UPGRADE_REQUIRED, "WebSocket version 13 only");
    }
    if let Some(origin) = header("origin") {
        let allowed = match &config.allowed_origins {
            None => true,
            Some(list) => list
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(origin)),
        };
        if !allowed {
            return Route::Refuse(Status::FORBIDDEN, "origin not allowed");
        }
    }
    match header("sec-websocket-key") {
        Some(key) if !key.is_empty() => Route::Upgrade(key.to_string()),
        _ => Route::Refuse(Status::BAD_REQUEST, "no Sec-WebSocket-Key"),
    }
}

/// An HTTP status line's code and text.
#[derive(Clone, Copy)]
struct Status(u16, &'static str);

impl Status {
    const OK: Status = Status(200, "OK");
    const BAD_REQUEST: Status = Status(400, "Bad Request");
    const FORBIDDEN: Status = Status(403, "Forbidden");
    const NOT_FOUND: Status = Status(404, "Not Found");
    const METHOD_NOT_ALLOWED: Status = Status(405, "Method Not Allowed");
    const UPGRADE_REQUIRED: Status = Status(426, "Upgrade Required");
    const HEAD_TOO_LARGE: Status = Status(431, "Request Header Fields Too Large");
}

/// Answers any HTTP request with 403 and `why` as the body, without
/// reading it, and closes: a plaintext client from another machine at a
/// port that speaks only TLS to them (the game's WebSocket port, the admin
/// server, the AxisPy port).
pub async fn forbid<S: AsyncWrite + Unpin>(stream: &mut S, why: &'static str) -> io::Result<()> {
    answer(stream, Status::FORBIDDEN, why).await.map(drop)
}

/// Answers with `status` and `why` as the body, and closes.
async fn answer<S>(stream: &mut S, status: Status, why: &'static str) -> io::Result<Upgrade<S>>
where
    S: AsyncWrite + Unpin,
{
    let extra: &[(&str, &str)] = match status.0 {
        426 => &[("Sec-WebSocket-Version", "13")],
        _ => &[],
    };
    respond(
        stream,
        status,
        "text/plain; charset=utf-8",
        extra,
        why.as_bytes(),
    )
    .await?;
    Ok(Upgrade::Refused(why))
}

async fn respond<S: AsyncWrite + Unpin>(
    stream: &mut S,
    status: Status,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\nCache-Control: no-store\r\n",
        status.0,
        status.1,
        body.len()
    );
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    stream.shutdown().await
}
