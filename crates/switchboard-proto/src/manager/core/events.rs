//! What goes into the core ([`ManagerEvent`]) and what it asks its driver
//! to do ([`ManagerAction`]).

use std::net::SocketAddr;

use crate::manager::{LogEntry, ShareError, ShareUpdate};
use crate::message::{Message, PeerId};
use crate::reason::{CloseCode, DisconnectReason, SocketError};
use crate::session::{ClientId, ReconnectToken, SharedSession};

/// What happened on the network, as the core takes it.
#[derive(Debug)]
#[non_exhaustive]
pub enum ManagerEvent {
    /// A connection completed its handshake.
    Connected {
        /// Its id.
        peer: PeerId,
        /// Its address.
        addr: SocketAddr,
    },
    /// A message arrived from a connection.
    Received {
        /// From whom.
        peer: PeerId,
        /// What.
        message: Message,
    },
    /// A connection ended.
    Disconnected {
        /// Which.
        peer: PeerId,
        /// Why.
        reason: DisconnectReason,
    },
    /// A connection sent something the socket layer could not take (an
    /// unknown system action, say); it is logged, within its address's share.
    Failed {
        /// Which.
        peer: PeerId,
        /// What.
        error: SocketError,
    },
    /// The shared store answered a [`ManagerAction::Claim`].
    Claimed {
        /// The connection that asked.
        peer: PeerId,
        /// The session it asked for.
        client: ClientId,
        /// The token the claim gave it.
        new_token: ReconnectToken,
        /// The session, `None` (unknown, wrong token, expired), or why the
        /// store could not be asked.
        result: Result<Option<SharedSession>, ShareError>,
    },
    /// The shared store says other processes took these sessions over
    /// (found while writing a [`ManagerAction::Share`]).
    MovedAway {
        /// Whose.
        clients: Vec<ClientId>,
    },
    /// The shared store may have lost what was written (it came back after
    /// an outage, or restarted empty): the online sessions are written
    /// again at once.
    StoreRestored,
}

/// What the core asks its driver to do, in order.
///
/// Exhaustive on purpose: every driver must carry out every action (a new
/// one is a compile error where it must be handled).
#[derive(Debug, Clone)]
pub enum ManagerAction {
    /// Send `message` to one connection.
    Send {
        /// To whom.
        peer: PeerId,
        /// What.
        message: Message,
    },
    /// Send `message` to each of `peers`, encoded once.
    SendToMany {
        /// To whom.
        peers: Vec<PeerId>,
        /// What.
        message: Message,
    },
    /// Close a connection after what was queued for it, telling it why.
    Close {
        /// Which.
        peer: PeerId,
        /// The close code the peer reads.
        code: CloseCode,
        /// Why, for people.
        reason: String,
    },
    /// A line for the operator's log (already given to `tracing`).
    Log(LogEntry),
    /// Ask the shared store for a session this process does not hold
    /// (`ManagerConfig::shared_sessions`); the answer comes back as
    /// [`ManagerEvent::Claimed`].
    Claim {
        /// The connection that presented it.
        peer: PeerId,
        /// The session.
        client: ClientId,
        /// The token presented.
        token: ReconnectToken,
        /// The token it gets when the claim succeeds.
        new_token: ReconnectToken,
    },
    /// Write a change of a session this process holds to the shared store,
    /// after those before it; sessions found taken over by another process
    /// come back as [`ManagerEvent::MovedAway`].
    Share(ShareUpdate),
    /// Save the game's checkpoint (`Outbox::checkpoint`), when the config
    /// has a store for it.
    Checkpoint(Vec<u8>),
}
