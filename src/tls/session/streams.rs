//! The session as tokio's byte streams: the connection's reader reads
//! through [`AsyncRead`], its writer writes and flushes through
//! [`AsyncWrite`].

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{tls_error, TlsStream, MAX_INCOMING, MAX_WRITE, READ_STEP, RECORD_OVERHEAD};

impl AsyncRead for TlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let session = &this.0;
        let mut state = this.state();
        loop {
            if !state.plain.is_empty() {
                let n = buf.remaining().min(state.plain.len());
                buf.put_slice(&state.plain[..n]);
                state.plain.advance(n);
                if state.plain.is_empty() {
                    state.plain = BytesMut::new();
                }
                return Poll::Ready(Ok(()));
            }
            if state.read_done {
                return Poll::Ready(Ok(()));
            }
            if state.incoming.len() >= MAX_INCOMING {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "TLS record too large",
                )));
            }
            state
                .incoming
                .reserve(READ_STEP.max(buf.remaining() + RECORD_OVERHEAD));
            let mut tcp = crate::socket::TcpReader(&session.tcp);
            let read = tokio_util::io::poll_read_buf(Pin::new(&mut tcp), cx, &mut state.incoming);
            if ready!(read)? == 0 {
                if !state.incoming.is_empty() {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer hung up inside a TLS record",
                    )));
                }
                state.read_done = true;
                continue;
            }
            let before = buf.filled().len();
            state.process(Some(buf)).map_err(tls_error)?;
            // What rustls answered (a key update), best effort: the next
            // write or flush sends the rest first.
            state.try_drain(&session.tcp)?;
            state.let_go();
            if buf.filled().len() > before {
                return Poll::Ready(Ok(()));
            }
        }
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        plain: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let mut state = this.state();
        ready!(this.poll_drain(&mut state, cx))?;
        let n = plain.len().min(MAX_WRITE);
        state.encrypt(&plain[..n])?;
        state.try_drain(&this.0.tcp)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut state = this.state();
        this.poll_drain(&mut state, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut state = this.state();
        ready!(this.poll_drain(&mut state, cx))?;
        state.close_notify()?;
        ready!(this.poll_drain(&mut state, cx))?;
        drop(state);
        let socket = socket2::SockRef::from(&this.0.tcp);
        Poll::Ready(socket.shutdown(std::net::Shutdown::Write))
    }
}
