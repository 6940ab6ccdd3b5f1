//! The open connection: its reader, its writer and its one timer, polled
//! together by one hand-written future.
//!
//! Hand-written rather than `async`, because an idle server holds one of
//! these per connection for as long as the peer stays: the compiler lays an
//! `async fn` out with every local of every await side by side (and the
//! arguments twice), which made this part of a connection's task 1.6 KiB.
//! Written out, it is the state it needs and no more; the rare slow paths
//! (an owner whose queue is full, an error to report) are boxed.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio::time::{Instant, Sleep};

use super::keepalive;
use super::reader::{ReadSide, Readable};
use super::writer::WriteSide;
use super::{kill_reason, ReadEnd, Reporter, WriteEnd};
use crate::codec;
use crate::socket::handle::SocketHandle;
use switchboard_proto::connection::ending::ReadEnd as Read;
use switchboard_proto::connection::lifecycle::{Lifecycle, Step};
use switchboard_proto::reason::{CloseCode, DisconnectReason, SocketError};

/// When the reader and the writer last dealt with the peer, in microseconds
/// since the connection opened: the connection's timer reads them.
pub(super) struct Clock {
    pub(super) started: Instant,
    /// Last heard from the peer; [`Clock::BUSY`] while the reader waits for
    /// the owner (time the owner takes is not the peer's silence).
    pub(super) heard: u64,
    /// Last frame written by the writer.
    pub(super) sent: u64,
}

impl Clock {
    pub(super) const BUSY: u64 = u64::MAX;

    fn new() -> Self {
        Self {
            started: Instant::now(),
            heard: 0,
            sent: 0,
        }
    }

    pub(super) fn stamp(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    fn at(&self, micros: u64) -> Instant {
        self.started + Duration::from_micros(micros)
    }
}

/// An event on its way to an owner whose queue is full (rare: boxed).
pub(super) type Delivery = Pin<Box<dyn Future<Output = bool> + Send>>;

pin_project_lite::pin_project! {
    /// Runs an open connection until it ends, and says why.
    pub(super) struct Open<'a, R, W, E> {
        handle: &'a SocketHandle,
        reporter: &'a Reporter<E>,
        read: ReadSide<R>,
        write: WriteSide<W>,
        clock: Clock,
        // One timer for the connection: the next keep-alive ping, the idle
        // deadline, or the end of a close, whichever comes first. Pushed
        // back lazily when it fires early.
        #[pin]
        timer: Sleep,
        // A protocol error on its way to the owner before the close goes on.
        reporting: Option<Delivery>,
        // The protocol crate's state machine of the connection's life: the
        // close under way, its deadline, the linger; this future moves the
        // bytes and the time.
        life: Lifecycle<Instant>,
        killed: bool,
    }
}

impl<'a, R, W, E> Open<'a, R, W, E>
where
    R: Readable,
    W: AsyncWrite + Unpin,
    E: Send + 'static,
{
    /// The connection just past its handshake: `buffer` holds what the
    /// peer sent after its hello.
    pub(super) fn new(
        io: R,
        buffer: bytes::BytesMut,
        decoder: codec::FrameDecoder,
        writer: W,
        handle: &'a SocketHandle,
        reporter: &'a Reporter<E>,
    ) -> Self {
        let config = handle.config();
        let clock = Clock::new();
        Self {
            handle,
            reporter,
            read: ReadSide::new(io, buffer, decoder, handle, clock.started),
            write: WriteSide::new(writer),
            clock,
            timer: tokio::time::sleep(config.keepalive_interval.min(config.idle_timeout)),
            reporting: None,
            life: Lifecycle::new(config.close_timeout),
            killed: false,
        }
    }
}

impl<R, W, E> Future for Open<'_, R, W, E>
where
    R: Readable,
    W: AsyncWrite + Unpin,
    E: Send + 'static,
{
    type Output = DisconnectReason;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<DisconnectReason> {
        let mut this = self.project();
        let handle = *this.handle;
        let config = handle.config();
        // The urgent close frame goes out with the close's reason.
        let order_close = |reason: &DisconnectReason| {
            handle.order(|out| {
                out.close_now
                    .get_or_insert((reason.close_code(), reason.to_string()));
            });
        };
        loop {
            if let Some(reporting) = this.reporting {
                // The owner hears of the error before anything else goes on.
                ready!(reporting.as_mut().poll(cx));
                *this.reporting = None;
            }
            if let Some(deadline) = this.life.deadline() {
                if deadline < this.timer.deadline() {
                    this.timer.as_mut().reset(deadline);
                }
            }
            if !*this.killed && handle.shared.poll_killed(cx).is_ready() {
                *this.killed = true;
                let reason = kill_reason(handle);
                if this.life.begin_close(reason.clone(), Instant::now()) {
                    order_close(&reason);
                }
                continue;
            }
            if !this.life.write_done() {
                if let Poll::Ready(end) = this.write.poll(cx, handle, this.clock) {
                    let step = match end {
                        WriteEnd::SentClose => {
                            this.life.close_sent(|| kill_reason(handle), Instant::now())
                        }
                        WriteEnd::Failed(err) => this.life.write_failed(err),
                    };
                    if let Step::End(reason) = step {
                        return Poll::Ready(reason);
                    }
                    continue;
                }
            }
            if !this.life.read_done() {
                let polled = this.read.poll(cx, handle, this.reporter, this.clock);
                if let Poll::Ready(end) = polled {
                    let step = match end {
                        ReadEnd::PeerClosed(close) => this.life.read_ended(Read::PeerClosed(close)),
                        ReadEnd::Eof => this.life.read_ended(Read::Eof),
                        ReadEnd::Failed(SocketError::Frame(codec::FrameError::Io(err))) => {
                            this.life.read_ended(Read::Lost(err))
                        }
                        ReadEnd::Failed(_) | ReadEnd::OwnerGone if this.life.write_done() => {
                            this.life.read_ended(Read::Eof)
                        }
                        ReadEnd::Failed(err) => {
                            let what = err.to_string();
                            tracing::debug!(peer = ?handle.peer_addr(), %err, "protocol error");
                            let batch = super::Batch::one(
                                super::SocketEvent::Error(err),
                                &this.reporter.wrap,
                            );
                            let events = this.reporter.events.clone();
                            *this.reporting =
                                Some(Box::pin(async move { events.send(batch).await.is_ok() }));
                            if this.life.broken_rule(&what, Instant::now()) {
                                order_close(&DisconnectReason::ProtocolError(what));
                            }
                            Step::Continue
                        }
                        ReadEnd::OwnerGone => {
                            // Gracefully: what was queued goes first.
                            handle.close(CloseCode::NORMAL, "closed");
                            this.life.owner_gone(Instant::now());
                            Step::Continue
                        }
                    };
                    if let Step::End(reason) = step {
                        return Poll::Ready(reason);
                    }
                    continue;
                }
            }
            if this.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let now = Instant::now();
            if let Some(deadline) = this.life.deadline() {
                if let Some(reason) = this.life.deadline_passed(now) {
                    return Poll::Ready(reason);
                }
                this.timer.as_mut().reset(deadline);
                continue;
            }
            let clock = &mut *this.clock;
            let heard = (clock.heard != Clock::BUSY && !this.life.read_done())
                .then(|| clock.at(clock.heard));
            // A frame that went out from the writer, or written directly by
            // a sender.
            let mut sent = clock.at(clock.sent);
            if let Some(at) = handle.outbound().last_direct {
                sent = sent.max(Instant::from_std(at));
            }
            if heard.is_some_and(|heard| now >= heard + config.keepalive_interval) {
                // Quiet for a whole interval: the read buffer goes until the
                // peer speaks again.
                this.read.release_buffer();
                this.write.release_buffer();
            }
            let next = match keepalive::tick(
                now,
                heard,
                sent,
                config.keepalive_interval,
                config.idle_timeout,
            ) {
                keepalive::Tick::Idle => {
                    // The silent peer is not waited for: no lingering for it
                    // to hang up once our close frame is out.
                    if this.life.idle(now) {
                        order_close(&DisconnectReason::IdleTimeout);
                    }
                    continue;
                }
                keepalive::Tick::Ping { next } => {
                    handle.order(|out| out.ping = true);
                    clock.sent = clock.stamp();
                    next
                }
                keepalive::Tick::Wait { next } => next,
            };
            this.timer.as_mut().reset(next);
        }
    }
}
