//! The admin server's accept loop: connections capped in total and per
//! address (the admin port shares the process's descriptors with the game:
//! it must never take them all), each request's headers read within a
//! deadline, and a connection that moves no byte for the idle timeout
//! closed. hyper serves each connection; the router answers, with the
//! peer's address in each request (`ConnectInfo`).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use axum::http::header;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use subtle::ConstantTimeEq;
use switchboard::socket::forbid;
use switchboard::socket::{Listener, ListenerLimits};
use switchboard::tls::{secure, Secured, TlsServer, PLAINTEXT_REFUSED};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::AdminConfig;

/// Serves `app` on `listener` until `stop`.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    config: AdminConfig,
    tls: Option<TlsServer>,
    stop: CancellationToken,
) {
    // The last `reserved_for_token` places are for requests with the
    // token: the operator gets in while others hold every other place.
    let total = config.max_connections + config.reserved_for_token;
    let limits = ListenerLimits::open(total, config.max_connections_per_address);
    Listener::new(listener, "admin", limits, stop.clone())
        .serve(|arrival| {
            let reserved = arrival.open > config.max_connections;
            let (stream, addr, mut places) = arrival.into_parts();
            // hyper reads each request's head within its own deadline.
            places.handshake_done();
            let (app, config, stop) = (app.clone(), config.clone(), stop.clone());
            let tls = tls.clone();
            async move {
                let _places = places;
                // TLS first (off loopback), within the header deadline.
                let secured = tokio::time::timeout(
                    config.header_read_timeout,
                    secure(stream, addr, tls.as_ref()),
                )
                .await;
                match secured {
                    Ok(Ok(Ok(stream))) => {
                        connection(stream, addr, app, &config, reserved, stop).await
                    }
                    Ok(Ok(Err(mut plain))) => {
                        let told = forbid(&mut plain, PLAINTEXT_REFUSED);
                        let _ = tokio::time::timeout(config.header_read_timeout, told).await;
                    }
                    Ok(Err(err)) => tracing::debug!(%addr, %err, "admin TLS handshake failed"),
                    Err(_) => tracing::debug!(%addr, "admin TLS handshake timed out"),
                }
            }
        })
        .await;
}

/// One connection, until it ends, idles out or the server stops. A
/// request without the right token is answered, then the connection is
/// closed (it cannot hold its place between requests); on a `reserved`
/// place, a request with no token at all is answered 503 at once.
async fn connection(
    stream: Secured,
    addr: SocketAddr,
    app: Router,
    config: &AdminConfig,
    reserved: bool,
    stop: CancellationToken,
) {
    let started = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let io = TokioIo::new(Watched {
        inner: stream,
        started,
        last: last.clone(),
    });
    let token = config.token.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
        request.extensions_mut().insert(ConnectInfo(addr));
        let carried = bearer(request.headers());
        // Whether it carries the right token decides only whether the
        // connection stays open: the router checks (and counts) it again.
        let right = matches!((&token, carried), (Some(token), Some(given))
            if bool::from(given.as_bytes().ct_eq(token.as_bytes())));
        let busy = reserved && carried.is_none();
        let mut app = app.clone();
        async move {
            let mut response = if busy {
                busy_response()
            } else {
                tower_service::Service::call(&mut app, request).await?
            };
            if !right {
                response.headers_mut().insert(
                    header::CONNECTION,
                    header::HeaderValue::from_static("close"),
                );
            }
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let idle = config.idle_timeout;
    let mut check = tokio::time::interval(
        idle.min(Duration::from_secs(1))
            .max(Duration::from_millis(10)),
    );
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = check.tick() => {
                let moved = Duration::from_millis(last.load(Ordering::Relaxed));
                if started.elapsed().saturating_sub(moved) > idle {
                    tracing::debug!(%addr, "admin connection idle: closed");
                    return;
                }
            }
            _ = stop.cancelled() => {
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(Duration::from_secs(2), conn.as_mut()).await;
                return;
            }
        }
    }
}

/// The bearer token a request carries, if any.
fn bearer(headers: &header::HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// What a request without a token gets on a place kept for the operator.
fn busy_response() -> axum::response::Response {
    let why =
        "admin server busy: its free places are taken; requests with the token are still served";
    let mut response = axum::response::IntoResponse::into_response((
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        why,
    ));
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
    response
}

/// A connection that notes when it last moved a byte (ms since `started`).
struct Watched {
    inner: Secured,
    started: Instant,
    last: Arc<AtomicU64>,
}

impl Watched {
    fn moved(&self) {
        let now = self.started.elapsed().as_millis() as u64;
        self.last.store(now, Ordering::Relaxed);
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.moved();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.moved();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
