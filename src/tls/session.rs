//! A server's TLS session over a TCP stream, on rustls's unbuffered API.
//!
//! rustls's buffered connection keeps a 4 KiB receive buffer for as long as
//! the session lives, and a `tokio_rustls` stream can only be written by the
//! task that owns it. A game server holds thousands of mostly idle
//! sessions and sends from the game's thread, so this session keeps its
//! own buffers and lets them go once they are empty (an idle session holds
//! rustls's keys and state, and nothing else), and it can be shared: the
//! connection's reader, its writer task and a sender writing directly each
//! hold a [`TlsStream`] of one session and take its lock for a step.
//!
//! ```text
//!  TcpStream ──read──▶ incoming ──rustls decrypts──▶ the reader's buffer (plain: what did not fit)
//!  sender / writer ──rustls encrypts──▶ outgoing ──write──▶ TcpStream
//! ```
//!
//! Ciphertext that the socket did not take stays in `outgoing`, in order:
//! nothing is encrypted behind it until it is out (a direct sender then
//! hands its frame to the writer task, which waits for the socket).

use std::io::{self, IoSlice};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll};

use bytes::{Buf, BytesMut};
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncodeTlsData, EncryptError, UnbufferedStatus,
};
use tokio::io::ReadBuf;
use tokio::net::TcpStream;

/// The most ciphertext a session buffers unprocessed: a handshake message
/// of rustls's largest (64 KiB) in records, or one application record.
const MAX_INCOMING: usize = 80 * 1024;

/// Ciphertext is read in steps of at least this many bytes.
const READ_STEP: usize = 4 * 1024;

/// The most plaintext one write encrypts (four records).
const MAX_WRITE: usize = 64 * 1024;

/// What TLS adds to a record: its header, the content type and the tag.
const RECORD_OVERHEAD: usize = 5 + 1 + 16;

/// The largest plaintext of one record.
const MAX_FRAGMENT: usize = 16 * 1024;

/// Slices of a direct send up to this size together become one record.
const GATHER: usize = 2 * 1024;

/// The most a thread keeps of the buffer its direct sends encrypt into.
const MAX_SCRATCH: usize = 64 * 1024;

thread_local! {
    /// The buffer a direct send encrypts into: one a thread, not one a
    /// session (an idle session holds no buffer).
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A server's TLS session over a TCP stream, shared by its holders: each
/// clone reads, writes and flushes the same session. Reads and writes
/// through one clone at a time per direction (the connection's reader
/// reads, its writer writes); `try_send` writes from any
/// thread without waiting.
#[derive(Clone)]
pub struct TlsStream(Arc<Session>);

struct Session {
    tcp: TcpStream,
    state: Mutex<State>,
}

struct State {
    conn: UnbufferedServerConnection,
    /// Ciphertext read and not yet processed (a partial record).
    incoming: BytesMut,
    /// Plaintext decrypted that the reader's buffer had no room for.
    plain: BytesMut,
    /// Ciphertext not yet written, from `sent` on.
    outgoing: Vec<u8>,
    sent: usize,
    /// The peer said close_notify, or its stream ended: no more plaintext.
    read_done: bool,
    /// Our close_notify is in `outgoing`.
    closing: bool,
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("peer", &self.0.tcp.peer_addr().ok())
            .finish_non_exhaustive()
    }
}

/// rustls's errors, as the I/O error a stream reports.
fn tls_error(err: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, err)
}

impl TlsStream {
    /// Runs the server's side of the handshake over `tcp` with `config`
    /// (the caller bounds the time it takes).
    pub(super) async fn accept(
        tcp: TcpStream,
        config: Arc<rustls::ServerConfig>,
    ) -> io::Result<Self> {
        let conn = UnbufferedServerConnection::new(config).map_err(tls_error)?;
        let mut state = State {
            conn,
            incoming: BytesMut::new(),
            plain: BytesMut::new(),
            outgoing: Vec::new(),
            sent: 0,
            read_done: false,
            closing: false,
        };
        loop {
            if let Err(err) = state.process(None) {
                // Best effort: the alert rustls has for the peer.
                state.encode_pending();
                let _ = write_all(&tcp, &state.outgoing).await;
                return Err(tls_error(err));
            }
            // Nothing is sent during the handshake but here.
            write_all(&tcp, &state.outgoing).await?;
            state.outgoing = Vec::new();
            if !state.conn.is_handshaking() {
                break;
            }
            if state.read_done {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            if state.incoming.len() >= MAX_INCOMING {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "TLS handshake message too large",
                ));
            }
            state.incoming.reserve(READ_STEP);
            tcp.readable().await?;
            match tcp.try_read_buf(&mut state.incoming) {
                Ok(0) => state.read_done = true,
                Ok(_) => {}
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) => return Err(err),
            }
        }
        state.let_go();
        Ok(Self(Arc::new(Session {
            tcp,
            state: Mutex::new(state),
        })))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().expect("TLS session lock")
    }

    /// Encrypts `slices` and writes them without waiting: `Some(true)` when
    /// all went, `Some(false)` when they are encrypted but part of the
    /// ciphertext waits for [`poll_flush`](tokio::io::AsyncWrite::poll_flush) (the
    /// writer's), `None` when nothing was taken because earlier ciphertext
    /// still waits (or the session failed: the writer finds out).
    pub(crate) fn try_send(&self, slices: &[IoSlice<'_>]) -> Option<bool> {
        let mut state = self.state();
        if state.try_drain(&self.0.tcp).ok()? {
            return None;
        }
        // `outgoing` is empty: encrypt into this thread's buffer, lent to
        // the session while the lock is held, so that a delivery allocates
        // nothing; what the socket does not take is copied out of it.
        state.outgoing = SCRATCH.take();
        let sealed = state.encrypt_gathered(slices);
        let drained = sealed.and_then(|()| state.try_write_out(&self.0.tcp));
        let left = state
            .outgoing
            .get(state.sent..)
            .unwrap_or_default()
            .to_vec();
        let mut scratch = std::mem::replace(&mut state.outgoing, left);
        state.sent = 0;
        if scratch.capacity() <= MAX_SCRATCH {
            scratch.clear();
            SCRATCH.set(scratch);
        }
        Some(!drained.ok()?)
    }

    /// Ready when a read would find bytes (or the end), without a buffer.
    pub(crate) fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        {
            let state = self.state();
            if !state.plain.is_empty() || state.read_done {
                return Poll::Ready(Ok(()));
            }
        }
        self.0.tcp.poll_read_ready(cx)
    }

    /// Writes the ciphertext waiting, waiting for the socket.
    fn poll_drain(&self, state: &mut State, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while state.try_drain(&self.0.tcp)? {
            ready!(self.0.tcp.poll_write_ready(cx))?;
        }
        Poll::Ready(Ok(()))
    }
}

impl State {
    /// Processes every whole record in `incoming`: application data into
    /// `into` while it has room (the rest into `plain`), what rustls has to
    /// say (handshake messages, alerts) onto `outgoing`. Ends when rustls
    /// waits for more bytes from the peer.
    fn process(&mut self, mut into: Option<&mut ReadBuf<'_>>) -> Result<(), rustls::Error> {
        loop {
            let UnbufferedStatus { mut discard, state } =
                self.conn.process_tls_records(&mut self.incoming);
            let mut waits = false;
            match state? {
                ConnectionState::ReadTraffic(mut traffic) => {
                    while let Some(record) = traffic.next_record() {
                        let record = record?;
                        discard += record.discard;
                        let payload = record.payload;
                        let fits = into
                            .as_ref()
                            .map_or(0, |buf| buf.remaining().min(payload.len()));
                        if let Some(buf) = into.as_mut() {
                            buf.put_slice(&payload[..fits]);
                        }
                        self.plain.extend_from_slice(&payload[fits..]);
                    }
                }
                ConnectionState::EncodeTlsData(mut encode) => {
                    encode_onto(&mut encode, &mut self.outgoing);
                }
                // What was encoded is in `outgoing`, which the caller writes
                // in order before anything encrypted after it.
                ConnectionState::TransmitTlsData(transmit) => transmit.done(),
                // Said once; what follows is the state without the peer.
                ConnectionState::PeerClosed => self.read_done = true,
                ConnectionState::Closed => {
                    self.read_done = true;
                    waits = true;
                }
                // Handshaking and waiting for the peer, or done and idle:
                // either way, nothing more without more bytes.
                _ => waits = true,
            }
            self.incoming.advance(discard);
            if waits {
                return Ok(());
            }
        }
    }

    /// Encodes what rustls has queued (an alert after an error).
    fn encode_pending(&mut self) {
        let status = self.conn.process_tls_records(&mut []);
        if let Ok(ConnectionState::EncodeTlsData(mut encode)) = status.state {
            encode_onto(&mut encode, &mut self.outgoing);
        }
    }

    /// Encrypts `plain` onto `outgoing` as one or more records, after
    /// anything rustls has to say first (a key update).
    fn encrypt(&mut self, plain: &[u8]) -> io::Result<()> {
        if plain.is_empty() {
            return Ok(());
        }
        let records = plain.len().div_ceil(MAX_FRAGMENT);
        let mut room = plain.len() + records * RECORD_OVERHEAD;
        loop {
            let UnbufferedStatus { discard, state } =
                self.conn.process_tls_records(&mut self.incoming);
            let done = match state.map_err(tls_error)? {
                ConnectionState::WriteTraffic(mut traffic) => {
                    let at = self.outgoing.len();
                    match traffic.encrypt(plain, spare(&mut self.outgoing, room)) {
                        Ok(n) => {
                            self.outgoing.truncate(at + n);
                            true
                        }
                        Err(EncryptError::InsufficientSize(more)) => {
                            self.outgoing.truncate(at);
                            room = more.required_size;
                            false
                        }
                        Err(err) => {
                            self.outgoing.truncate(at);
                            return Err(io::Error::other(err.to_string()));
                        }
                    }
                }
                ConnectionState::EncodeTlsData(mut encode) => {
                    encode_onto(&mut encode, &mut self.outgoing);
                    false
                }
                ConnectionState::TransmitTlsData(transmit) => {
                    transmit.done();
                    false
                }
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotConnected,
                        "the TLS session cannot send",
                    ))
                }
            };
            self.incoming.advance(discard);
            if done {
                return Ok(());
            }
        }
    }

    /// Encrypts `slices` onto `outgoing`: small ones gathered into one
    /// record, so a batch of short frames costs one record, not one each.
    fn encrypt_gathered(&mut self, slices: &[IoSlice<'_>]) -> io::Result<()> {
        if let [one] = slices {
            return self.encrypt(one);
        }
        let mut gathered = [0; GATHER];
        let mut len = 0;
        for slice in slices {
            if len + slice.len() > GATHER {
                self.encrypt(&gathered[..len])?;
                len = 0;
            }
            if slice.len() > GATHER {
                self.encrypt(slice)?;
            } else {
                gathered[len..len + slice.len()].copy_from_slice(slice);
                len += slice.len();
            }
        }
        self.encrypt(&gathered[..len])
    }

    /// Queues our close_notify (once).
    fn close_notify(&mut self) -> io::Result<()> {
        if std::mem::replace(&mut self.closing, true) {
            return Ok(());
        }
        let at = self.outgoing.len();
        let UnbufferedStatus { discard, state } = self.conn.process_tls_records(&mut self.incoming);
        let queued = match state {
            Ok(ConnectionState::WriteTraffic(mut traffic)) => {
                traffic.queue_close_notify(spare(&mut self.outgoing, RECORD_OVERHEAD + 2))
            }
            _ => Ok(0),
        };
        self.incoming.advance(discard);
        match queued {
            Ok(n) => {
                self.outgoing.truncate(at + n);
                Ok(())
            }
            Err(err) => {
                self.outgoing.truncate(at);
                Err(io::Error::other(err.to_string()))
            }
        }
    }

    /// Writes what waits in `outgoing` without waiting: `true` while some
    /// is left. An empty `outgoing` is let go.
    fn try_drain(&mut self, tcp: &TcpStream) -> io::Result<bool> {
        let left = self.try_write_out(tcp)?;
        if !left && self.outgoing.capacity() > 0 {
            self.outgoing = Vec::new();
            self.sent = 0;
        }
        Ok(left)
    }

    /// Writes what waits in `outgoing` without waiting, and keeps the
    /// buffer: `true` while some is left.
    fn try_write_out(&mut self, tcp: &TcpStream) -> io::Result<bool> {
        while self.sent < self.outgoing.len() {
            match tcp.try_write(&self.outgoing[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(err) => return Err(err),
            }
        }
        Ok(false)
    }

    /// Lets the buffers go that hold nothing.
    fn let_go(&mut self) {
        if self.incoming.is_empty() {
            self.incoming = BytesMut::new();
        }
        if self.plain.is_empty() {
            self.plain = BytesMut::new();
        }
    }
}

/// Encodes a handshake record or alert rustls has queued onto `outgoing`.
fn encode_onto<Data>(encode: &mut EncodeTlsData<'_, Data>, outgoing: &mut Vec<u8>) {
    let at = outgoing.len();
    let mut room = 512;
    loop {
        match encode.encode(spare(outgoing, room)) {
            Ok(n) => return outgoing.truncate(at + n),
            Err(EncodeError::InsufficientSize(need)) if need.required_size > room => {
                outgoing.truncate(at);
                room = need.required_size;
            }
            Err(_) => return outgoing.truncate(at),
        }
    }
}

/// `len` zeroed bytes at the end of `buf`, to be written and truncated to
/// what was.
fn spare(buf: &mut Vec<u8>, len: usize) -> &mut [u8] {
    let at = buf.len();
    buf.resize(at + len, 0);
    &mut buf[at..]
}

/// Writes all of `bytes` (the handshake's flights).
async fn write_all(tcp: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        tcp.writable().await?;
        match tcp.try_write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

mod streams;

#[cfg(test)]
mod tests;
