//! The bounded queue that carries events from network tasks to their owner.
//!
//! Network tasks push; the owner drains it either with `poll()` on its own
//! thread (which emits signals) or as an async [`Stream`]. The queue is
//! bounded: when the owner stops draining it, the reader tasks wait, stop
//! reading their sockets, and TCP flow control pushes back on the peers. No
//! event is dropped and memory stays bounded.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::mpsc;

use crate::runtime;

/// Events per batch that a reader sends at most (it sends what one read of
/// its socket brought in).
pub(crate) const BATCH: usize = 256;

/// Bytes after which a reader ends its batch (256 KiB). With at most one
/// frame past it, a queue of `capacity / 256` batches holds at most about
/// `(capacity / 256) * (256 KiB + max_frame_len)` bytes.
pub(crate) const BATCH_BYTES: u64 = 256 * 1024;

/// The receiving end of a network object's events.
///
/// Producers send events in batches (one queue operation per socket read,
/// not per message) of at most 256 events and about 256 KiB; the queue holds
/// `capacity / 256` batches (at least one), so about `capacity` events at
/// most.
#[derive(Debug)]
pub struct EventQueue<E> {
    rx: mpsc::Receiver<Vec<E>>,
    ready: std::vec::IntoIter<E>,
}

impl<E> EventQueue<E> {
    pub(crate) fn new(capacity: usize) -> (mpsc::Sender<Vec<E>>, Self) {
        let (tx, rx) = mpsc::channel(capacity.div_ceil(BATCH).max(1));
        (
            tx,
            Self {
                rx,
                ready: Vec::new().into_iter(),
            },
        )
    }

    /// The next event if one is queued, without waiting.
    pub fn try_next(&mut self) -> Option<E> {
        if let Some(event) = self.ready.next() {
            return Some(event);
        }
        self.ready = self.rx.try_recv().ok()?.into_iter();
        self.ready.next()
    }

    /// Waits for the next event. `None` once every producer is gone and the
    /// queue is empty.
    pub async fn next(&mut self) -> Option<E> {
        loop {
            if let Some(event) = self.ready.next() {
                return Some(event);
            }
            self.ready = self.rx.recv().await?.into_iter();
        }
    }

    /// Blocks the calling thread up to `timeout` for the next event. Outside an
    /// async context only; inside one it does not wait and returns what is
    /// queued, if anything.
    pub fn next_blocking(&mut self, timeout: Duration) -> Option<E> {
        if let Some(event) = self.try_next() {
            return Some(event);
        }
        if timeout.is_zero() || !runtime::may_block() {
            return None;
        }
        let rx = &mut self.rx;
        let batch = runtime::handle()
            .block_on(async move { tokio::time::timeout(timeout, rx.recv()).await })
            .ok()
            .flatten()?;
        self.ready = batch.into_iter();
        self.ready.next()
    }

    /// Whether no event is waiting.
    pub fn is_empty(&self) -> bool {
        self.ready.len() == 0 && self.rx.is_empty()
    }
}

// Nothing in the queue is ever pinned; events are moved out by value.
impl<E> Unpin for EventQueue<E> {}

impl<E> Stream for EventQueue<E> {
    type Item = E;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<E>> {
        let this = &mut *self;
        loop {
            if let Some(event) = this.ready.next() {
                return Poll::Ready(Some(event));
            }
            match this.rx.poll_recv(cx) {
                Poll::Ready(Some(batch)) => this.ready = batch.into_iter(),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
