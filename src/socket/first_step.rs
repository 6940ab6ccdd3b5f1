//! What a game port's connection does before the protocol's hello: TLS
//! (where the server speaks it to other machines: `tls::accept`, plain
//! from this machine, plaintext from another refused with its reason) and,
//! on the WebSocket port, the HTTP upgrade; all within the handshake
//! timeout and the gate's eviction. A connection that fails here is counted
//! as a failed handshake and never announced.

use std::net::SocketAddr;
use std::sync::Arc;

use switchboard_proto::connection::control;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::accept::tell_plain;
use super::connection::{self, Reporter};
use super::server::EndpointEvent;
use super::websocket::{self, Upgrade, UpgradeRules};
use super::{CloseCode, DisconnectReason, SocketHandle};
use crate::tls::{self, Accepted, TlsServer};

/// A connection to the WebSocket listener: its HTTP request within the
/// handshake timeout (a page is served and the connection ends; a bad
/// request is answered and counted as a failed handshake), then the same
/// task as a TCP connection.
///
/// An `async` block, not an `async fn` (which would keep its arguments
/// twice), and the upgrade boxed: it is big and brief, and the task would
/// otherwise keep room for it for the connection's whole life.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn would store its arguments twice in every connection's task"
)]
pub(super) fn run_websocket(
    stream: TcpStream,
    addr: SocketAddr,
    handle: SocketHandle,
    reporter: Reporter<EndpointEvent>,
    rules: Arc<UpgradeRules>,
    tls: Option<TlsServer>,
) -> impl std::future::Future<Output = ()> {
    async move {
        let config = handle.config();
        // TLS first, where the server speaks it (wss://): within the same
        // handshake timeout as the upgrade.
        let deadline = tokio::time::Instant::now() + config.handshake_timeout;
        let Some(tls) = tls else {
            return upgrade_and_run(stream, deadline, handle, reporter, &rules).await;
        };
        match tls_first_step(stream, addr, &tls, deadline, &handle).await {
            Ok(Accepted::Tls(stream)) => {
                upgrade_and_run(stream, deadline, handle, reporter, &rules).await
            }
            Ok(Accepted::Plain(stream)) => {
                upgrade_and_run(stream, deadline, handle, reporter, &rules).await
            }
            Ok(Accepted::PlaintextRefused(mut stream)) => {
                let told = websocket::forbid(&mut stream, tls::PLAINTEXT_REFUSED);
                let _ = tokio::time::timeout(config.close_timeout, told).await;
                fail(&handle, reporter, plaintext_refused())
            }
            Err(reason) => fail(&handle, reporter, reason),
        }
    }
}

/// The first step of a connection to a port that speaks TLS (`tls::accept`)
/// by `deadline`, unless the gate evicts it first: how it came in, or why
/// it failed.
async fn tls_first_step(
    stream: TcpStream,
    addr: SocketAddr,
    tls: &TlsServer,
    deadline: tokio::time::Instant,
    handle: &SocketHandle,
) -> Result<Accepted, DisconnectReason> {
    let first = Box::pin(tokio::time::timeout_at(
        deadline,
        tls::accept(stream, addr, tls),
    ));
    tokio::select! {
        accepted = first => match accepted {
            Ok(Ok(accepted)) => Ok(accepted),
            Ok(Err(err)) => Err(DisconnectReason::ConnectionLost(err.into())),
            Err(_) => Err(DisconnectReason::HandshakeTimeout),
        },
        // Evicted as the oldest pending handshake.
        () = handle.shared.killed() => Err(DisconnectReason::HandshakeTimeout),
    }
}

/// The WebSocket upgrade by `deadline`, then the connection's task.
async fn upgrade_and_run<S>(
    stream: S,
    deadline: tokio::time::Instant,
    handle: SocketHandle,
    reporter: Reporter<EndpointEvent>,
    rules: &UpgradeRules,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let upgrade = Box::pin(tokio::time::timeout_at(
        deadline,
        websocket::accept_upgrade(stream, rules),
    ));
    let accepted = tokio::select! {
        accepted = upgrade => accepted.ok(),
        // Evicted as the oldest pending handshake.
        () = handle.shared.killed() => None,
    };
    let failed = match accepted {
        Some(Ok(Upgrade::WebSocket { ws, .. })) => {
            return connection::run_ws(*ws, handle, reporter).await
        }
        Some(Ok(Upgrade::Served)) => {
            handle.set_closed();
            return;
        }
        Some(Ok(Upgrade::Refused(why))) => DisconnectReason::ProtocolError(why.into()),
        None => DisconnectReason::HandshakeTimeout,
        Some(Err(err)) => DisconnectReason::ConnectionLost(err.into()),
    };
    fail(&handle, reporter, failed);
}

/// A connection that failed before its protocol began: closed, counted as
/// a failed handshake. Dropping the reporter takes it out of the gate.
pub(super) fn fail(
    handle: &SocketHandle,
    mut reporter: Reporter<EndpointEvent>,
    reason: DisconnectReason,
) {
    handle.set_closed();
    if let Some(hook) = reporter.on_handshake_failure.take() {
        hook(&reason);
    }
}

/// Why a plain peer from another machine was closed.
fn plaintext_refused() -> DisconnectReason {
    DisconnectReason::ProtocolError("plaintext from another machine (TLS required)".into())
}

/// A connection to a TCP port that speaks TLS: TLS within the handshake
/// timeout (or plain from this machine), then the connection's task. A
/// plain peer from another machine is told, in the plain protocol, that
/// the server speaks only TLS to it (a hello and a close of code
/// `REFUSED`), and closed.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn would store its arguments twice in every connection's task"
)]
pub(super) fn run_tls(
    stream: TcpStream,
    addr: SocketAddr,
    handle: SocketHandle,
    reporter: Reporter<EndpointEvent>,
    tls: TlsServer,
) -> impl std::future::Future<Output = ()> {
    async move {
        let config = handle.config();
        let deadline = tokio::time::Instant::now() + config.handshake_timeout;
        match tls_first_step(stream, addr, &tls, deadline, &handle).await {
            Ok(Accepted::Tls(stream)) => connection::run_tls(stream, handle, reporter).await,
            Ok(Accepted::Plain(stream)) => connection::run_tcp(stream, handle, reporter).await,
            Ok(Accepted::PlaintextRefused(mut stream)) => {
                let hello = control::hello_frame(crate::PROTOCOL_VERSION);
                let close =
                    control::close_frame(CloseCode::REFUSED, tls::PLAINTEXT_REFUSED, &config.codec);
                let frames = [&hello[..], &close[..]].concat();
                let told = tell_plain(&mut stream, &frames);
                let _ = tokio::time::timeout(config.close_timeout, told).await;
                fail(&handle, reporter, plaintext_refused())
            }
            Err(reason) => fail(&handle, reporter, reason),
        }
    }
}
