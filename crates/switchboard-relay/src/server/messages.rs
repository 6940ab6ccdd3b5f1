//! What travels on the relay channel: its actions and their contents
//! (`docs/PROTOCOL.md`, section 10).

use serde::{Deserialize, Serialize};

use crate::transform::Transform;

pub use switchboard::message::RELAY_CHANNEL;

switchboard::framework_channel! {
    /// The relay channel, as a [`Channel`](switchboard::Channel).
    RelayChannel = RELAY_CHANNEL, "Relay"
}

switchboard::framework_channel! {
    /// `RELAY_MOVES_CHANNEL`: a datagram client's own transforms
    /// ([`RelayOptions::datagrams`]), as a [`Channel`](switchboard::Channel).
    RelayMovesChannel = switchboard::message::RELAY_MOVES_CHANNEL, "RelayMoves"
}

switchboard::framework_channel! {
    /// `RELAY_VIEW_CHANNEL`: others' transforms in batches to a datagram
    /// client ([`RelayOptions::datagrams`]), as a [`Channel`](switchboard::Channel).
    RelayViewChannel = switchboard::message::RELAY_VIEW_CHANNEL, "RelayView"
}

switchboard::actions! {
    /// What travels on the relay channel.
    pub enum RelayAction {
        /// Client → relay: [`RelayHello`] (name, bot flag).
        Hello = 1,
        /// Client → relay: a [`Transform`].
        Transform = 2,
        /// Relay → client: your player id (`u32`).
        Welcome = 3,
        /// Relay → client: a [`Relayed`] transform of someone in your zone.
        Relayed = 4,
        /// Relay → client: someone you could see left (`u32`).
        Left = 5,
        /// Relay → client: a message could not be used (`String`).
        Error = 6,
        /// Relay → client: a notice from the operator, for every player
        /// (`String`).
        Notice = 7,
        /// Relay → client: your zone lives on another relay of the
        /// service ([`Redirect`](crate::Redirect)); this connection closes.
        Redirect = 8,
        /// Client → relay: the [`Handover`](crate::Handover) ticket a
        /// redirect gave, instead of a hello: the same id here.
        Handover = 9,
        /// Client → relay: [`RelayOptions`], after the hello (a relay that
        /// does not know them answers `Error`).
        Options = 10,
        /// Relay → client (only to a client that asked, `RelayOptions::batch`):
        /// a [`Batch`] of what the relay would have sent one by one.
        Batch = 11,
        /// Relay → client (only to a client that asked,
        /// `RelayOptions::compact`): what the relay would have sent one by
        /// one, as compact records ([`compact`](crate::compact);
        /// `docs/PROTOCOL.md`, section 10).
        Compact = 12,
        /// Relay → client, on `RELAY_VIEW_CHANNEL` (only to a client that
        /// asked, `RelayOptions::compact_datagrams`): others' transforms as
        /// compact records, each datagram readable alone
        /// ([`ViewDecoder`](crate::compact::ViewDecoder)).
        CompactView = 13,
        /// Client → relay, on `RELAY_MOVES_CHANNEL`: the `CompactView`
        /// datagrams this client read ([`ViewAck`](crate::compact::ViewAck)),
        /// which the relay writes the next ones against.
        ViewAck = 14,
    }
}

/// What a native client asks of the relay (`RelayAction::Options`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayOptions {
    /// Everything for this client that leaves in one write goes in one
    /// frame, a [`Batch`]: one frame header, one length and one wake-up
    /// instead of one per message (with `--tick-hz`, one frame a tick).
    pub batch: bool,
    /// Like `batch`, and transforms as compact records: quantized
    /// positions sent as differences, senders and zones as small numbers,
    /// fields only when they changed (read them with a
    /// [`CompactDecoder`](crate::compact::CompactDecoder)). Takes precedence
    /// over `batch`.
    pub compact: bool,
    /// Like `batch`, and others' transforms in batches of their own on
    /// `RELAY_VIEW_CHANNEL`, which a QUIC connection carries as datagrams
    /// (a lost one delays nothing behind it); this client's own transforms
    /// may come on `RELAY_MOVES_CHANNEL`. What else the relay says (welcome,
    /// left, notices) stays on the stream. `compact` takes precedence (its
    /// records are differences, which must all arrive).
    pub datagrams: bool,
    /// This client, on WebTransport, follows a redirect to another relay's
    /// WebTransport: a [`Redirect`](crate::Redirect) to it carries that
    /// relay's certificate hashes, and it is handed over to a relay that
    /// offers WebTransport even with no WebSocket port. A client that
    /// does not say so is redirected to WebSocket, as before.
    pub webtransport_redirects: bool,
    /// Others' transforms as compact records in datagrams (`CompactView`
    /// on `RELAY_VIEW_CHANNEL`), each whole or the difference from a state
    /// this client acknowledged (`ViewAck`, on `RELAY_MOVES_CHANNEL`): a
    /// lost one delays nothing and costs nothing after it. Implies
    /// `datagrams` (own transforms on the moves channel; welcome, left and
    /// notices on the stream in batches); takes precedence over `compact`.
    pub compact_datagrams: bool,
}

impl RelayOptions {
    /// Reads the options a client sent. Fields are only ever appended: a
    /// field the client did not send reads as off, and fields after the
    /// ones this relay knows (a newer client's) are ignored.
    pub fn read(content: &[u8]) -> Result<RelayOptions, NotABool> {
        let flag = |at: usize| match content.get(at) {
            None | Some(0) => Ok(false),
            Some(1) => Ok(true),
            Some(other) => Err(NotABool(*other)),
        };
        Ok(RelayOptions {
            batch: flag(0)?,
            compact: flag(1)?,
            datagrams: flag(2)?,
            webtransport_redirects: flag(3)?,
            compact_datagrams: flag(4)?,
        })
    }
}

/// Options a client sent with a byte that is not a bool
/// ([`RelayOptions::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("relay options: {0} is not a bool")]
pub struct NotABool(pub u8);

/// Several messages in one frame (`RelayAction::Batch`), in the order
/// they would have gone one by one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// The relay's tick when it was written: its clock (ms since it
    /// started) divided by the pacing wait (`--tick-hz`: the tick's
    /// length); 0 when the relay does not pace.
    pub tick: u64,
    /// The relay's clock when it was written, ms since it started.
    pub server_time_ms: u64,
    /// Each message: its action (`RelayAction`) and its content, exactly
    /// as it would have been sent alone (`Relayed`, `Left`, ...).
    pub messages: Vec<(u16, Vec<u8>)>,
}

/// A native client's introduction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayHello {
    /// Its name.
    pub name: String,
    /// Whether it is a bot.
    pub bot: bool,
}

/// A transform as the relay sends it on: stamped with the sender and the
/// server time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relayed {
    /// The sender.
    pub player_id: u32,
    /// The server's clock, milliseconds since it started.
    pub server_time_ms: u64,
    /// The transform.
    pub transform: Transform,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_read_appended_fields_as_off_and_a_byte_that_is_not_a_bool_as_an_error() {
        assert_eq!(RelayOptions::read(&[]), Ok(RelayOptions::default()));
        let all = RelayOptions {
            batch: true,
            compact: true,
            datagrams: true,
            webtransport_redirects: true,
            compact_datagrams: true,
        };
        // A newer client's fields past these are ignored.
        assert_eq!(RelayOptions::read(&[1, 1, 1, 1, 1, 9]), Ok(all));
        let err = RelayOptions::read(&[0, 2]).unwrap_err();
        assert_eq!(err, NotABool(2));
        assert_eq!(err.to_string(), "relay options: 2 is not a bool");
    }
}
