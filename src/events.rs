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

/// The receiving end of a network object's events.
#[derive(Debug)]
pub struct EventQueue<E> {
    rx: mpsc::Receiver<E>,
}

impl<E> EventQueue<E> {
    pub(crate) fn new(capacity: usize) -> (mpsc::Sender<E>, Self) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (tx, Self { rx })
    }

    /// The next event if one is queued, without waiting.
    pub fn try_next(&mut self) -> Option<E> {
        self.rx.try_recv().ok()
    }

    /// Waits for the next event. `None` once every producer is gone and the
    /// queue is empty.
    pub async fn next(&mut self) -> Option<E> {
        self.rx.recv().await
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
        runtime::handle()
            .block_on(async move { tokio::time::timeout(timeout, rx.recv()).await })
            .ok()
            .flatten()
    }

    /// How many events are waiting.
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// Whether no event is waiting.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }
}

impl<E> Stream for EventQueue<E> {
    type Item = E;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<E>> {
        self.rx.poll_recv(cx)
    }
}
