//! What a connection's handle does with a QUIC connection: the sequenced
//! channels' messages as datagrams, the datagrams' counters, a client's
//! rebind.

use std::sync::Arc;

use serde::Serialize;

use super::{DatagramStats, Datagrams};
use crate::codec::{self, ContentError};
use crate::message::{Action, Channel, EncodedMessage, Message};
use crate::socket::{SocketHandle, SocketState};
use switchboard_proto::connection::datagram;

impl SocketHandle {
    /// Lends the connection's datagrams to its senders (once, when a QUIC
    /// connection starts).
    pub(crate) fn set_datagrams(&self, link: Arc<Datagrams>) {
        let _ = self.shared.datagrams.set(link);
    }

    /// Whether the connection runs over QUIC.
    pub fn is_quic(&self) -> bool {
        self.shared.datagrams.get().is_some()
    }

    /// Whether the connection is a browser's WebTransport session (on the
    /// QUIC port; [`is_quic`](Self::is_quic) too).
    pub fn is_webtransport(&self) -> bool {
        self.shared
            .datagrams
            .get()
            .is_some_and(|link| link.is_webtransport())
    }

    /// What the connection's datagrams did (QUIC only; `None` over TCP and
    /// WebSocket).
    pub fn datagram_stats(&self) -> Option<DatagramStats> {
        self.shared.datagrams.get().map(|link| link.stats())
    }

    /// The largest datagram the connection's path takes now (QUIC only):
    /// a sequenced message bigger than this travels on the stream.
    pub fn max_datagram_size(&self) -> Option<usize> {
        self.shared.datagrams.get()?.max_size()
    }

    /// Moves a client's QUIC connection onto `socket`, a new UDP socket, as
    /// when a phone leaves Wi-Fi for mobile data: the connection, its
    /// session and everything queued go on from the new address, with no
    /// reconnect. An error over TCP or WebSocket (which cannot), or on a
    /// server's side of a connection.
    pub fn rebind(&self, socket: std::net::UdpSocket) -> std::io::Result<()> {
        match self.shared.datagrams.get() {
            Some(link) => link.rebind(socket),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "only a QUIC connection moves to a new socket",
            )),
        }
    }

    /// The datagrams to send a message of `channel` on: a QUIC connection's
    /// that is open, for a channel its settings declare sequenced.
    fn datagram_route(&self, channel: u16) -> Option<&Datagrams> {
        if !datagram::goes_as_datagram(channel, &self.shared.config.sequenced_channels) {
            return None;
        }
        let link = self.shared.datagrams.get()?;
        (self.state() == SocketState::Open).then_some(&**link)
    }

    /// Sends a message of `channel` and `action`, whose content `content`
    /// writes (about `content_len` bytes: the datagram's buffer is made that
    /// big at once), as a datagram if its channel goes so. `false`: it goes
    /// on the stream (not sequenced, not QUIC, or too big for the path).
    pub(crate) fn sent_as_datagram(
        &self,
        channel: u16,
        action: u16,
        content_len: usize,
        content: impl FnOnce(&mut Vec<u8>) -> Result<(), ContentError>,
    ) -> Result<bool, ContentError> {
        let Some(link) = self.datagram_route(channel) else {
            return Ok(false);
        };
        link.send_with(datagram::MAX_HEAD_LEN + content_len, |buf, sequence| {
            datagram::put_head(buf, sequence, channel, action);
            content(buf)
        })
    }

    /// [`sent_as_datagram`](Self::sent_as_datagram) of a typed value.
    pub(crate) fn value_as_datagram<C: Channel, A: Action, T: Serialize + ?Sized>(
        &self,
        channel: C,
        action: A,
        value: &T,
    ) -> Result<bool, ContentError> {
        // A game's state of a few dozen bytes: one allocation.
        self.sent_as_datagram(channel.id(), action.id(), 64, |buf| {
            codec::encode_value_into(value, buf)
        })
    }

    /// [`sent_as_datagram`](Self::sent_as_datagram) of a message encoded
    /// once for many peers: its frame's payload, when the frame is not
    /// compressed (a compressed one is too big for a datagram anyway).
    pub(crate) fn encoded_as_datagram(&self, message: &EncodedMessage) -> bool {
        if !self.is_quic() {
            return false;
        }
        let frame = message.as_bytes();
        // The channel is the payload's first varint: one byte below 251,
        // which every channel that goes as a datagram but an application's
        // past 250 is.
        let goes = match frame.get(codec::HEADER_LEN) {
            Some(&channel) if channel < 251 => {
                datagram::goes_as_datagram(channel.into(), &self.shared.config.sequenced_channels)
            }
            Some(_) => !self.shared.config.sequenced_channels.is_empty(),
            None => false,
        };
        if !goes || frame.get(codec::HEADER_LEN - 1) != Some(&0) {
            return false;
        }
        let Ok(decoded) = Message::decode(frame.slice(codec::HEADER_LEN..)) else {
            return false;
        };
        let content = decoded.content_bytes();
        self.sent_as_datagram(
            decoded.channel_id(),
            decoded.action_id(),
            content.len(),
            |buf| {
                buf.extend_from_slice(content);
                Ok(())
            },
        )
        .unwrap_or(false)
    }
}
