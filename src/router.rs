//! Per-channel subscribers: the channel layer shared by clients and servers.
//!
//! Code subscribes a slot to a channel; every message arriving on that channel
//! reaches the slot as a [`Delivery`] carrying the sender, the action and the
//! content. A message on a channel nobody subscribed to is counted and logged,
//! never an error that ends the connection.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use serde::de::DeserializeOwned;

use crate::codec::ContentError;
use crate::message::{Action, Channel, DecodeError, Message, PeerId, TypedMessage};
use crate::signal::{Signal, SlotHandle};

/// A message as a subscriber receives it.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Who sent it: a client's peer id on a server, [`PeerId::SERVER`] on a client.
    pub sender: PeerId,
    /// The message itself.
    pub message: Message,
}

impl Delivery {
    /// The action as the application's enum, if it is one of its variants.
    pub fn action<A: Action>(&self) -> Option<A> {
        self.message.action()
    }

    /// Decodes the content as a `T`.
    pub fn content<T: DeserializeOwned>(&self) -> Result<T, ContentError> {
        self.message.content()
    }

    /// The message as a value of a typed action enum (see
    /// [`Message::typed`]).
    pub fn typed<M: TypedMessage>(&self) -> Result<M, DecodeError> {
        self.message.typed()
    }
}

/// Slots per channel. Slots may subscribe and unsubscribe while a message is
/// being routed.
#[derive(Debug, Default)]
pub struct Router {
    channels: RefCell<HashMap<u16, Rc<Signal<Delivery>>>>,
    unrouted: Cell<u64>,
}

impl Router {
    /// An empty router.
    pub fn new() -> Self {
        Self::default()
    }

    /// Connects `slot` to `channel`; it stays until the returned
    /// [`SlotHandle`] disconnects it (or [`unsubscribe`](Self::unsubscribe)).
    pub fn subscribe<C: Channel>(
        &self,
        channel: C,
        slot: impl FnMut(&Delivery) + 'static,
    ) -> SlotHandle {
        let signal = self
            .channels
            .borrow_mut()
            .entry(channel.id())
            .or_default()
            .clone();
        signal.connect(slot)
    }

    /// Removes every slot of `channel`.
    pub fn unsubscribe<C: Channel>(&self, channel: C) {
        let removed = self.channels.borrow_mut().remove(&channel.id());
        if let Some(signal) = removed {
            signal.disconnect_all();
        }
    }

    /// Hands a message to its channel's slots. Returns false, counts and logs
    /// when nobody listens on the channel.
    pub fn route(&self, sender: PeerId, message: &Message) -> bool {
        let channel = message.channel_id();
        let signal = self.channels.borrow().get(&channel).cloned();
        match signal {
            Some(signal) if signal.slot_count() > 0 => {
                let message = message.clone();
                signal.emit(&Delivery { sender, message });
                true
            }
            _ => {
                self.unrouted.set(self.unrouted.get() + 1);
                tracing::debug!(
                    %sender,
                    channel,
                    action = message.action_id(),
                    "message on a channel without subscribers"
                );
                false
            }
        }
    }

    /// Messages that arrived on a channel without subscribers.
    pub fn unrouted(&self) -> u64 {
        self.unrouted.get()
    }
}
