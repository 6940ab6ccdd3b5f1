//! The client's one event path: the network's events taken into the core,
//! the core's events queued for the game, and the ways the game takes them
//! (drain, next_event, poll, the stream), each running the event's signal
//! and channel slots once as it hands the event over.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;

use super::{ClientEvent, ClientSignals, NetworkClient};
use crate::client::ClientAction;
use crate::router::Router;
use crate::socket::{PeerId, SendError, SocketEvent};

impl NetworkClient {
    /// Takes in what the network brought and hands every event to the
    /// signals and channel slots, on this thread; the events themselves are
    /// not kept. Returns how many were taken. Call once per frame when slots
    /// are all the game uses ([`drain`](Self::drain) runs the same slots and
    /// gives the events too).
    pub fn poll(&mut self) -> usize {
        self.poll_timeout(Duration::ZERO)
    }

    /// Like [`poll`](Self::poll), but first waits up to `timeout` for an
    /// event if none is queued.
    pub fn poll_timeout(&mut self, timeout: Duration) -> usize {
        self.drain_timeout(timeout).count()
    }

    /// Takes in what the network brought and hands the events over, in
    /// order. Each event's signal and channel slots run as the iterator
    /// yields it; events not taken (the iterator dropped early) stay queued
    /// for the next call.
    pub fn drain(&mut self) -> Drain<'_> {
        self.drain_timeout(Duration::ZERO)
    }

    /// Like [`drain`](Self::drain), but first waits up to `timeout` for an
    /// event if none is queued.
    pub fn drain_timeout(&mut self, timeout: Duration) -> Drain<'_> {
        self.pump(timeout);
        Drain {
            events: &mut self.events,
            signals: &self.signals,
            router: &self.router,
        }
    }

    /// The next event, waiting up to `timeout` for one; its signal and
    /// channel slots run as it is handed over.
    pub fn next_event(&mut self, timeout: Duration) -> Option<ClientEvent> {
        if self.events.is_empty() {
            self.pump(timeout);
        }
        self.drain_timeout(Duration::ZERO).next()
    }

    /// Moves socket events into the core (waiting up to `timeout` for the
    /// first), runs its clock, carries out its actions, and keeps its events
    /// for the game.
    pub(super) fn pump(&mut self, timeout: Duration) {
        let mut wait = if self.events.is_empty() {
            timeout
        } else {
            Duration::ZERO
        };
        // At most a queue's worth per call: a server that sends as fast as
        // the game takes cannot keep one call (or the events kept for the
        // game) growing forever; the rest waits in the socket's queue.
        let mut budget = self.socket_config.event_queue_len.max(1);
        while budget > 0 {
            budget -= 1;
            if let Some(deadline) = self.core.next_deadline() {
                wait = wait.min(deadline.saturating_duration_since(Instant::now()));
            }
            let event = match self.socket.as_mut() {
                Some(socket) => socket.next_event_blocking(wait),
                None => {
                    if !wait.is_zero() && crate::runtime::may_block() {
                        std::thread::sleep(wait);
                    }
                    None
                }
            };
            let Some(event) = event else { break };
            wait = Duration::ZERO;
            self.take_in(event);
        }
        self.core.tick(Instant::now());
        self.carry_out();
        self.collect_events();
    }

    fn take_in(&mut self, event: SocketEvent) {
        if matches!(event, SocketEvent::Disconnected(_)) {
            self.socket = None;
        }
        self.core.handle(event, Instant::now());
    }

    /// Does what the core asked. Returns the result of the last send, for
    /// `request`.
    pub(super) fn carry_out(&mut self) -> Option<Result<(), SendError>> {
        let mut last = None;
        while let Some(action) = self.core.poll_action() {
            match action {
                ClientAction::Connect => {
                    let config = self.socket_config.clone();
                    let addr = self.server_addr().to_string();
                    self.socket = Some(self.dialer.connect(&addr, config));
                }
                ClientAction::Send(message) => {
                    last = Some(match &self.socket {
                        Some(socket) => socket.send(&message),
                        None => Err(SendError::Closed),
                    });
                }
                ClientAction::Close(reason) => {
                    if let Some(socket) = &self.socket {
                        socket.close(&reason);
                    }
                }
            }
        }
        last
    }

    /// Moves the core's events into the game's queue.
    fn collect_events(&mut self) {
        while let Some(event) = self.core.poll_event() {
            self.events.push_back(event);
        }
    }
}

/// The events [`NetworkClient::drain`] hands over, in order; each one's
/// signal and channel slots run as it is yielded.
pub struct Drain<'a> {
    events: &'a mut VecDeque<ClientEvent>,
    signals: &'a ClientSignals,
    router: &'a Router,
}

impl std::fmt::Debug for Drain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drain")
            .field("queued", &self.events.len())
            .finish()
    }
}

impl Iterator for Drain<'_> {
    type Item = ClientEvent;

    fn next(&mut self) -> Option<ClientEvent> {
        let event = self.events.pop_front()?;
        emit(&event, self.signals, self.router);
        Some(event)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.events.len(), Some(self.events.len()))
    }
}

/// Runs the signal of one event (and its channel's slots, for a message).
fn emit(event: &ClientEvent, signals: &ClientSignals, router: &Router) {
    match event {
        ClientEvent::Connected => signals.connected.emit(&()),
        ClientEvent::Welcomed(welcomed) => signals.welcomed.emit(welcomed),
        ClientEvent::Refused(refused) => signals.refused.emit(refused),
        ClientEvent::Message(message) => {
            signals.received.emit(message);
            router.route(PeerId::SERVER, message);
        }
        ClientEvent::ConnectionLost(reason) => signals.connection_lost.emit(reason),
        ClientEvent::Reconnecting(attempt) => signals.reconnecting.emit(attempt),
        ClientEvent::Disconnected(reason) => signals.disconnected.emit(reason),
        ClientEvent::Error(error) => signals.error.emit(error),
        ClientEvent::RequestDone { ticket, status } => {
            signals.request_done.emit(&(*ticket, status.clone()))
        }
    }
}

/// For tokio code: the client's events as a stream (on a `LocalSet` or a
/// current-thread runtime: the client is not `Send`); each one's signal
/// and channel slots run as it is yielded. It ends once the client has
/// given up for good and every event was taken.
impl Stream for NetworkClient {
    type Item = ClientEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ClientEvent>> {
        let this = &mut *self;
        loop {
            if let Some(event) = this.events.pop_front() {
                emit(&event, &this.signals, &this.router);
                return Poll::Ready(Some(event));
            }
            // Socket events first, then the clock.
            let mut progressed = false;
            if let Some(socket) = this.socket.as_mut() {
                if let Poll::Ready(Some(event)) = socket.poll_next_event(cx) {
                    this.take_in(event);
                    progressed = true;
                }
            }
            this.core.tick(Instant::now());
            this.carry_out();
            this.collect_events();
            if progressed || !this.events.is_empty() {
                continue;
            }
            if this.core.is_finished() {
                return Poll::Ready(None);
            }
            // Wake for the core's next deadline as well as for the socket.
            match this.core.next_deadline() {
                Some(deadline) => {
                    let deadline = tokio::time::Instant::from_std(deadline);
                    let timer = this
                        .timer
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                    if timer.deadline() != deadline {
                        timer.as_mut().reset(deadline);
                    }
                    if timer.as_mut().poll(cx).is_ready() {
                        continue;
                    }
                }
                None => this.timer = None,
            }
            return Poll::Pending;
        }
    }
}
