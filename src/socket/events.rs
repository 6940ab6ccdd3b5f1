//! The bounded queue that carries events from network tasks to their owner.
//!
//! Network tasks push; the owner drains it either with `poll()` on its own
//! thread (which emits signals) or as an async [`Stream`]. The queue is
//! bounded: when the owner stops draining it, the reader tasks wait, stop
//! reading their sockets, and TCP flow control pushes back on the peers. No
//! event is dropped and memory stays bounded.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use std::net::SocketAddr;

use bytes::Bytes;
use futures::Stream;
use tokio::sync::{mpsc, Notify};

use super::{PeerId, SocketEvent};
use crate::message::Message;
use crate::runtime;

/// Events per batch that a reader sends at most (it sends what one read of
/// its socket brought in: a 64 KiB read holds about 900 small messages, and
/// every batch may cost the owner a wake-up).
pub(crate) const BATCH: usize = 1024;

/// The queue holds one batch per this many events of its capacity.
const EVENTS_PER_SLOT: usize = 256;

/// Bytes after which a reader ends its batch (256 KiB). With at most one
/// frame past it, a queue of `capacity / 256` batches holds at most about
/// `(capacity / 256) * (256 KiB + max_frame_len)` bytes.
pub(crate) const BATCH_BYTES: u64 = 256 * 1024;

/// Where a connection's events come from: on a server, the peer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    pub(crate) peer: PeerId,
    pub(crate) addr: SocketAddr,
}

/// Turns a connection's events into its owner's event type (a server adds
/// the peer): a plain function and the connection's origin, copied into
/// every batch without a reference count.
pub(crate) struct Wrap<E> {
    origin: Origin,
    convert: fn(Origin, SocketEvent) -> E,
}

impl<E> Clone for Wrap<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for Wrap<E> {}

impl<E> Wrap<E> {
    pub(crate) fn new(origin: Origin, convert: fn(Origin, SocketEvent) -> E) -> Self {
        Self { origin, convert }
    }

    pub(crate) fn call(&self, event: SocketEvent) -> E {
        (self.convert)(self.origin, event)
    }
}

impl Wrap<SocketEvent> {
    /// A client's events, as they are.
    pub(crate) fn socket() -> Self {
        let origin = Origin {
            peer: PeerId::SERVER,
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        };
        Self::new(origin, |_, event| event)
    }
}

/// One connection's share of a queue it shares with others (a server's):
/// the bytes of its batches not yet taken by the owner. Its reader waits
/// for room before queueing more, so one fast or big sender cannot fill the
/// queue ahead of everyone else; its socket stops being read meanwhile and
/// TCP pushes back on the peer.
#[derive(Debug)]
pub(crate) struct Credit {
    queued: AtomicU64,
    budget: u64,
    room: Notify,
}

impl Credit {
    /// A share of `budget` bytes (at least one batch always goes in).
    pub(crate) fn new(budget: usize) -> Arc<Self> {
        Arc::new(Self {
            queued: AtomicU64::new(0),
            budget: budget as u64,
            room: Notify::new(),
        })
    }

    /// Counts `bytes` more if the connection has less than its budget
    /// queued; `false` (nothing counted) otherwise.
    pub(crate) fn try_acquire(&self, bytes: u64) -> bool {
        if self.queued.load(Ordering::Acquire) < self.budget {
            self.queued.fetch_add(bytes, Ordering::AcqRel);
            return true;
        }
        false
    }

    /// Waits until the connection has less than its budget queued, then
    /// counts `bytes` more.
    pub(crate) async fn acquire(&self, bytes: u64) {
        loop {
            let room = self.room.notified();
            if self.try_acquire(bytes) {
                return;
            }
            room.await;
        }
    }

    /// The owner took `bytes` of this connection's batches.
    fn release(&self, bytes: u64) {
        let before = self.queued.fetch_sub(bytes, Ordering::AcqRel);
        if before >= self.budget && before - bytes < self.budget {
            self.room.notify_one();
        }
    }
}

/// What a network task hands its owner in one queue operation.
///
/// The messages of one socket read stay in one shared buffer, `chunk`, as
/// ranges; the owner slices each message out of it when it takes it. So the
/// buffer's reference count is touched once per batch by the network
/// thread, and per message only on the owner's thread, instead of
/// bouncing between the two cores for every message.
pub(crate) struct Batch<E> {
    items: Vec<Item>,
    /// The events of `Item::Event`, in order.
    events: Vec<E>,
    chunk: Bytes,
    wrap: Wrap<E>,
    /// The share it was counted against, and for how many bytes.
    credit: Option<(Arc<Credit>, u64)>,
    /// When it was made, so that the owner can tell how long it waited.
    made: Instant,
}

/// One entry of a [`Batch`]: 16 bytes, whatever the owner's event type.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Item {
    /// The next of the batch's ready events.
    Event,
    /// A message whose content is `chunk[start..start + len]`.
    Message {
        channel: u16,
        action: u16,
        start: u32,
        len: u32,
    },
}

impl<E> Batch<E> {
    /// A batch of `items`, whose messages lie in `chunk` and whose other
    /// events are `events`.
    pub(crate) fn new(items: Vec<Item>, events: Vec<E>, chunk: Bytes, wrap: Wrap<E>) -> Self {
        Self {
            items,
            events,
            chunk,
            wrap,
            credit: None,
            made: Instant::now(),
        }
    }

    /// The batch, counted as `bytes` against `credit`, which the owner
    /// gives back when it takes the batch.
    pub(crate) fn counted(mut self, credit: Arc<Credit>, bytes: u64) -> Self {
        self.credit = Some((credit, bytes));
        self
    }

    /// A batch of one event.
    pub(crate) fn one(event: SocketEvent, wrap: &Wrap<E>) -> Self {
        Self {
            items: vec![Item::Event],
            events: vec![wrap.call(event)],
            chunk: Bytes::new(),
            wrap: *wrap,
            credit: None,
            made: Instant::now(),
        }
    }
}

/// The rest of the batch being handed out.
struct Ready<E> {
    items: std::vec::IntoIter<Item>,
    events: std::vec::IntoIter<E>,
    chunk: Bytes,
    wrap: Option<Wrap<E>>,
}

impl<E> Ready<E> {
    fn empty() -> Self {
        Self {
            items: Vec::new().into_iter(),
            events: Vec::new().into_iter(),
            chunk: Bytes::new(),
            wrap: None,
        }
    }

    fn from(batch: Batch<E>) -> Self {
        if let Some((credit, bytes)) = &batch.credit {
            credit.release(*bytes);
        }
        Self {
            items: batch.items.into_iter(),
            events: batch.events.into_iter(),
            chunk: batch.chunk,
            wrap: Some(batch.wrap),
        }
    }

    fn next(&mut self) -> Option<E> {
        match self.items.next()? {
            Item::Event => self.events.next(),
            Item::Message {
                channel,
                action,
                start,
                len,
            } => {
                let (start, len) = (start as usize, len as usize);
                let content = self.chunk.slice(start..start + len);
                let message = Message::from_raw(channel, action, content);
                let wrap = self.wrap.as_ref()?;
                Some(wrap.call(SocketEvent::Received(message)))
            }
        }
    }

    fn len(&self) -> usize {
        self.items.len()
    }
}

impl<E> std::fmt::Debug for Ready<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ready")
            .field("items", &self.items.len())
            .finish()
    }
}

/// The receiving end of a network object's events.
///
/// Producers send events in batches (one queue operation per socket read,
/// not per message) of at most 1024 events and about 256 KiB; the queue holds
/// `capacity / 256` batches (at least one). A server's queue, shared by all
/// its peers, mostly carries batches of a few events; a busy connection's
/// batches are full.
pub(crate) struct EventQueue<E> {
    rx: mpsc::Receiver<Batch<E>>,
    ready: Ready<E>,
    capacity: usize,
    /// The longest any batch taken since the last
    /// [`take_longest_wait`](Self::take_longest_wait) waited in the queue.
    longest_wait: Duration,
}

impl<E> std::fmt::Debug for EventQueue<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventQueue")
            .field("ready", &self.ready.len())
            .field("batches", &self.rx.len())
            .finish()
    }
}

impl<E> EventQueue<E> {
    pub(crate) fn new(capacity: usize) -> (mpsc::Sender<Batch<E>>, Self) {
        let (tx, rx) = mpsc::channel(capacity.div_ceil(EVENTS_PER_SLOT).max(1));
        (
            tx,
            Self {
                rx,
                ready: Ready::empty(),
                capacity: capacity.max(1),
                longest_wait: Duration::ZERO,
            },
        )
    }

    /// Hands out `batch`'s events next, noting how long it waited.
    fn take(&mut self, batch: Batch<E>) {
        self.longest_wait = self.longest_wait.max(batch.made.elapsed());
        self.ready = Ready::from(batch);
    }

    /// The longest any batch of events taken since the last call waited in
    /// the queue between its network task and its owner; zero if none was
    /// taken.
    pub(crate) fn take_longest_wait(&mut self) -> Duration {
        std::mem::take(&mut self.longest_wait)
    }

    /// The next event if one is queued, without waiting.
    pub(crate) fn try_next(&mut self) -> Option<E> {
        if let Some(event) = self.ready.next() {
            return Some(event);
        }
        let batch = self.rx.try_recv().ok()?;
        self.take(batch);
        self.ready.next()
    }

    /// Waits for the next event. `None` once every producer is gone and the
    /// queue is empty.
    pub(crate) async fn next(&mut self) -> Option<E> {
        loop {
            if let Some(event) = self.ready.next() {
                return Some(event);
            }
            let batch = self.rx.recv().await?;
            self.take(batch);
        }
    }

    /// Blocks the calling thread up to `timeout` for the next event. Outside an
    /// async context only; inside one it does not wait and returns what is
    /// queued, if anything.
    pub(crate) fn next_blocking(&mut self, timeout: Duration) -> Option<E> {
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
        self.take(batch);
        self.ready.next()
    }

    /// Hands the queued events to `deliver`, on this thread, after waiting
    /// up to `timeout` for the first when none is queued (zero: no wait);
    /// at most the queue's capacity in one call, so that a peer that sends
    /// as fast as the owner handles cannot keep one call going forever.
    /// Returns how many were delivered: what `poll()` and `poll_timeout()`
    /// do with the events they dispatch to signals.
    pub(crate) fn deliver(&mut self, timeout: Duration, mut deliver: impl FnMut(E)) -> usize {
        let Some(first) = self.next_blocking(timeout) else {
            return 0;
        };
        deliver(first);
        let mut delivered = 1;
        while delivered < self.capacity {
            let Some(event) = self.try_next() else { break };
            deliver(event);
            delivered += 1;
        }
        delivered
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
                Poll::Ready(Some(batch)) => this.take(batch),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_tells_how_long_its_batches_waited() {
        let (tx, mut queue) = EventQueue::new(1024);
        let wrap = Wrap::socket();
        assert_eq!(queue.take_longest_wait(), Duration::ZERO, "nothing taken");
        tx.try_send(Batch::one(SocketEvent::Connected, &wrap))
            .unwrap();
        std::thread::sleep(Duration::from_millis(30));
        tx.try_send(Batch::one(SocketEvent::Connected, &wrap))
            .unwrap();
        assert!(queue.try_next().is_some() && queue.try_next().is_some());
        let waited = queue.take_longest_wait();
        assert!(waited >= Duration::from_millis(30), "{waited:?}");
        assert_eq!(queue.take_longest_wait(), Duration::ZERO, "taken once");
    }
}
