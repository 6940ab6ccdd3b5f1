//! The JSON-lines listener: connections capped in total and per address,
//! lines read with a length limit and an idle timeout, written with a
//! write timeout from a queue bounded in lines and bytes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use switchboard::socket::{Arrival, Listener, ListenerLimits};
use switchboard::tls::{secure, TlsServer, PLAINTEXT_REFUSED};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use tokio_util::sync::CancellationToken;

use crate::server::RelayConfig;

/// The lines waiting for one JSON client, bounded in lines and in bytes:
/// the hub's end. Dropping every sender ends the connection's writer.
pub(crate) struct JsonQueue {
    lines: mpsc::Sender<JsonLine>,
    bytes: Arc<AtomicUsize>,
    max_bytes: usize,
}

/// The connection writer's end of a [`JsonQueue`].
struct JsonLines {
    lines: mpsc::Receiver<JsonLine>,
    bytes: Arc<AtomicUsize>,
}

impl JsonQueue {
    fn new(config: &RelayConfig) -> (Self, JsonLines) {
        let (lines, rx) = mpsc::channel(config.json_queue.max(1));
        let bytes = Arc::new(AtomicUsize::new(0));
        let queue = JsonQueue {
            lines,
            bytes: bytes.clone(),
            max_bytes: config.json_queue_bytes,
        };
        (queue, JsonLines { lines: rx, bytes })
    }

    /// Queues `line`; `false` when the client is too far behind (in lines
    /// or in bytes) and must be dropped as a slow consumer.
    pub(crate) fn push(&self, line: &JsonLine) -> bool {
        let queued = self.bytes.fetch_add(line.len(), Ordering::Relaxed) + line.len();
        if queued > self.max_bytes || self.lines.try_send(line.clone()).is_err() {
            self.bytes.fetch_sub(line.len(), Ordering::Relaxed);
            return false;
        }
        true
    }
}

impl JsonLines {
    /// Writes the queued lines until the hub drops the queue, a write fails
    /// or one takes longer than `timeout`; then hangs up.
    async fn write_to<W: AsyncWrite + Unpin>(mut self, mut write: W, timeout: Duration) {
        while let Some(line) = self.lines.recv().await {
            let written = tokio::time::timeout(timeout, write.write_all(line.as_bytes())).await;
            self.bytes.fetch_sub(line.len(), Ordering::Relaxed);
            if !matches!(written, Ok(Ok(()))) {
                break;
            }
        }
        let _ = tokio::time::timeout(timeout, write.shutdown()).await;
    }
}

pub(crate) enum JsonEvent {
    Joined {
        addr: SocketAddr,
        lines: JsonQueue,
        id: oneshot::Sender<u32>,
    },
    Line {
        id: u32,
        line: Result<String, String>,
    },
    Gone {
        id: u32,
    },
}

/// A line for JSON clients, newline included, shared by every recipient.
pub(crate) type JsonLine = Arc<str>;

pub(crate) fn json_line_of(mut text: String) -> JsonLine {
    text.push('\n');
    text.into()
}

pub(crate) fn error_line(message: &str) -> JsonLine {
    json_line_of(json!({"type": "error", "message": message}).to_string())
}

pub(crate) async fn accept_json(
    listener: TcpListener,
    events: mpsc::Sender<JsonEvent>,
    config: RelayConfig,
    tls: Option<TlsServer>,
    stop: CancellationToken,
) {
    let limits = ListenerLimits::open(
        config.max_json_connections,
        config.max_json_connections_per_address,
    );
    Listener::new(listener, "relay JSON-lines", limits, stop)
        .serve(|arrival| json_connection(arrival, events.clone(), config.clone(), tls.clone()))
        .await;
}

async fn json_connection(
    arrival: Arrival,
    events: mpsc::Sender<JsonEvent>,
    config: RelayConfig,
    tls: Option<TlsServer>,
) {
    // A JSON-lines peer has no handshake: its place is an open one only.
    let (stream, addr, mut places) = arrival.into_parts();
    // TLS first (off loopback, the relay's own): within the idle timeout,
    // as the first line would be. A plain client from another machine is
    // told why in a line of its protocol.
    let secured =
        tokio::time::timeout(config.json_idle_timeout, secure(stream, addr, tls.as_ref()));
    let stream = match secured.await {
        Ok(Ok(Ok(stream))) => stream,
        Ok(Ok(Err(mut plain))) => {
            let line = error_line(PLAINTEXT_REFUSED);
            let told = plain.write_all(line.as_bytes());
            let _ = tokio::time::timeout(config.json_write_timeout, told).await;
            return;
        }
        Ok(Err(err)) => {
            tracing::debug!(%addr, %err, "JSON client's TLS failed");
            return;
        }
        Err(_) => return,
    };
    places.handshake_done();
    let (read, write) = tokio::io::split(stream);
    let (queue, queued) = JsonQueue::new(&config);
    let (id_tx, id_rx) = oneshot::channel();
    if events
        .send(JsonEvent::Joined {
            addr,
            lines: queue,
            id: id_tx,
        })
        .await
        .is_err()
    {
        return;
    }
    let Ok(id) = id_rx.await else { return };
    // The writer ends when the hub drops this client (garbage, slow, abuse,
    // stop); the reader stops with it, so the player leaves its zone at once.
    let mut writer = tokio::spawn(queued.write_to(write, config.json_write_timeout));
    let mut writer_done = false;
    let mut lines = FramedRead::new(read, LinesCodec::new_with_max_length(config.max_json_line));
    loop {
        let next = tokio::select! {
            next = tokio::time::timeout(config.json_idle_timeout, lines.next()) => next,
            _ = &mut writer => {
                writer_done = true;
                break;
            }
        };
        let line = match next {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(_) => {
                tracing::debug!(%addr, "JSON client idle: disconnected");
                break;
            }
        };
        let line = match line {
            Ok(line) => Ok(line),
            Err(LinesCodecError::MaxLineLengthExceeded) => {
                Err(format!("line longer than {} bytes", config.max_json_line))
            }
            Err(LinesCodecError::Io(_)) => break,
        };
        if events.send(JsonEvent::Line { id, line }).await.is_err() {
            break;
        }
    }
    // The hub drops this client's line queue on `Gone`; the writer then
    // sends what is queued (an error line, say) and hangs up.
    let _ = events.send(JsonEvent::Gone { id }).await;
    if !writer_done
        && tokio::time::timeout(Duration::from_secs(2), &mut writer)
            .await
            .is_err()
    {
        writer.abort();
    }
}
