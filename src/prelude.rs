//! What a game needs, in one import: `use switchboard::prelude::*;`.
//!
//! The declarations ([`channels!`](crate::channels), [`actions!`](crate::actions),
//! [`messages!`](crate::messages)), the server side ([`GameLogic`] and what
//! it is given and answers with, [`ServerManager`] and its builder), the
//! client side ([`NetworkClient`], its events and requests), signals, and
//! `Duration` (timeouts and ticks).

pub use std::time::Duration;

pub use crate::client::{ClientConfig, ClientEvent, NetworkClient, RequestStatus, RequestTicket};
pub use crate::manager::{
    Audience, GameLogic, ManagerConfig, Outbox, Rejection, Request, RunningServer, ServerError,
    ServerManager,
};
pub use crate::message::{Message, TypedMessage};
pub use crate::session::ClientId;
pub use crate::signal::Signal;
pub use crate::socket::BindScope;
pub use crate::{actions, channels, messages};
