//! A TCP stream shared by a connection's reader, its writer task and the
//! senders' direct writes.

use tokio::io::{AsyncRead, AsyncWrite};

/// One half of a TCP stream shared with the senders' direct writes: reads
/// and writes go through `&TcpStream`, so the reader, the writer task and a
/// sender can each hold one.
pub(super) struct SharedTcp(pub(super) std::sync::Arc<tokio::net::TcpStream>);

impl AsyncRead for SharedTcp {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut TcpReader(&self.0)).poll_read(cx, buf)
    }
}

/// A TCP stream read without waiting for more than readiness, by whoever
/// holds it (a shared stream, or a TLS session's ciphertext).
pub(crate) struct TcpReader<'a>(pub(crate) &'a tokio::net::TcpStream);

impl AsyncRead for TcpReader<'_> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        loop {
            std::task::ready!(self.0.poll_read_ready(cx))?;
            let room = buf.remaining();
            let mut short = false;
            // A short read emptied the socket: its readiness goes now,
            // instead of costing the next read a system call that finds
            // nothing. The read runs inside `try_io` so that what is cleared
            // is the readiness seen *before* the read: bytes that arrive
            // during or after it raise readiness again and are never left
            // unread (clearing after the read, a peer's answer to what we
            // just wrote could land in between and wait for the next event
            // on the socket: seconds). The end of the stream stays ready.
            let read = self.0.try_io(tokio::io::Interest::READABLE, || {
                let n = self.0.try_read_buf(buf)?;
                if n > 0 && n < room {
                    short = true;
                    return Err(std::io::ErrorKind::WouldBlock.into());
                }
                Ok(n)
            });
            match read {
                Ok(_) => return std::task::Poll::Ready(Ok(())),
                Err(_) if short => return std::task::Poll::Ready(Ok(())),
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(err) => return std::task::Poll::Ready(Err(err)),
            }
        }
    }
}

impl AsyncWrite for SharedTcp {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        loop {
            std::task::ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write(buf) {
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
                result => return std::task::Poll::Ready(result),
            }
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let socket = socket2::SockRef::from(&*self.0);
        std::task::Poll::Ready(socket.shutdown(std::net::Shutdown::Write))
    }
}
