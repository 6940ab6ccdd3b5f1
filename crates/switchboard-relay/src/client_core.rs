//! [`RelayClientCore`]: the relay's client side without IO, the one every
//! Rust relay client drives (the bots, the load tester, the Bevy plugin).
//!
//! It says what to send when a connection opens (a [`RelayHello`], or the
//! [`Handover`] ticket a redirect gave, then the [`RelayOptions`]), reads
//! whatever the relay sends in any of its forms (one message, a
//! [`Batch`](crate::Batch), a compact stream) into [`RelayClientEvent`]s,
//! keeps the player id, the compact stream's state and a redirect's ticket,
//! and forgets what a lost connection ends. The driver owns the socket and
//! the clock: it dials, sends what the core hands it, and feeds it what
//! arrives.
//!
//! Transforms come as [`Heard`]: a `Relayed` content is handed over still
//! encoded, so that a driver that needs two fields (the load tester reads
//! 380,000 a second) reads only those; [`Heard::decode`] gives the whole.

use std::borrow::Cow;

use switchboard::codec;
use switchboard::message::{Action, Message};

use crate::compact::{CompactDecoder, CompactRecord, ViewDecoder};
use crate::server::{RelayAction, RelayChannel, RelayHello, RelayOptions, Relayed};
use crate::transform::Transform;
use crate::wire::Reader;
use crate::zones::{Handover, Redirect};

/// Another player's transform, as the relay sent it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Heard<'a> {
    /// A [`Relayed`] message's content (alone or in a batch), not decoded
    /// yet.
    Encoded(&'a [u8]),
    /// A compact record, made whole by the connection's decoder.
    Compact {
        /// Who.
        player_id: u32,
        /// The relay's clock, ms since it started.
        server_time_ms: u64,
        /// Where and how.
        transform: &'a Transform,
        /// Whether its unknown fields came with this record (else they are
        /// the ones held from before).
        extra_changed: bool,
    },
}

/// What [`Heard::peek`] reads of a transform in place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peek<'a> {
    /// The sender.
    pub player_id: u32,
    /// The relay's clock, ms since it started.
    pub server_time_ms: u64,
    /// Where the sender is.
    pub position: [f32; 3],
    /// The value of the unknown field asked for, if this transform brought
    /// it (a compact record brings its fields only when they changed).
    pub field: Option<&'a str>,
}

impl<'a> Heard<'a> {
    /// The sender, the relay's clock, the position and the value of the
    /// unknown field `field`, read in place without allocating; `None` if
    /// an encoded one does not decode.
    ///
    /// Read by hand along `Relayed`'s bincode layout (standard config:
    /// varint integers and lengths), skipping the rest: for a driver that
    /// takes many transforms and needs only these (the load tester's bots
    /// take 380,000 a second at 1,000 bots × 20 Hz, and serde's borrowed
    /// decode of the same fields took three times as long). The tests hold
    /// it to `Relayed`'s encoding.
    pub fn peek(&self, field: &str) -> Option<Peek<'a>> {
        match *self {
            Heard::Encoded(content) => peek_encoded(content, field),
            Heard::Compact {
                player_id,
                server_time_ms,
                transform,
                extra_changed,
            } => Some(Peek {
                player_id,
                server_time_ms,
                position: transform.position,
                field: extra_changed
                    .then(|| transform.extra.get(field).map(String::as_str))
                    .flatten(),
            }),
        }
    }

    /// The sender, the relay's clock and the transform; `None` if an
    /// encoded one does not decode.
    pub fn decode(&self) -> Option<(u32, u64, Cow<'_, Transform>)> {
        match *self {
            Heard::Encoded(content) => {
                let relayed: Relayed = codec::decode_value(content).ok()?;
                Some((
                    relayed.player_id,
                    relayed.server_time_ms,
                    Cow::Owned(relayed.transform),
                ))
            }
            Heard::Compact {
                player_id,
                server_time_ms,
                transform,
                ..
            } => Some((player_id, server_time_ms, Cow::Borrowed(transform))),
        }
    }
}

/// What the relay said, read by a [`RelayClientCore`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RelayClientEvent<'a> {
    /// This connection's player id (the same after a handover).
    Welcome(u32),
    /// Another player's transform.
    Transform(Heard<'a>),
    /// A player left this client's view, zone or the relay.
    Left(u32),
    /// A notice from the operator.
    Notice(String),
    /// The relay could not use a message of ours, and why.
    Error(String),
    /// The zone lives on another relay: connect to it (`addr`, or
    /// `websocket` for a WebSocket client); the core presents the ticket
    /// there when that connection opens. This connection closes.
    Redirect(Redirect),
    /// What the relay sent could not be read (a compact stream cut or
    /// damaged, a message that does not decode): the stream cannot be
    /// followed past it, so close the connection and open another.
    Broken(String),
}

/// The client side of one player's relay session, across its connections.
#[derive(Debug)]
pub struct RelayClientCore {
    hello: RelayHello,
    options: RelayOptions,
    player_id: Option<u32>,
    /// A redirect's ticket, presented on the next connection.
    handover: Option<Handover>,
    /// This connection's compact stream, when it asked for one.
    compact: Option<CompactDecoder>,
    /// With datagrams: what arrives out of order is sorted here.
    view: View,
    /// This connection's compact view datagrams, when it asked for them.
    compact_view: Option<ViewDecoder>,
}

impl RelayClientCore {
    /// Plays as `name` (`bot`: a bot, which bots and operators tell apart),
    /// with the relay's default options.
    pub fn new(name: impl Into<String>, bot: bool) -> Self {
        Self {
            hello: RelayHello {
                name: name.into(),
                bot,
            },
            options: RelayOptions::default(),
            player_id: None,
            handover: None,
            compact: None,
            view: View::default(),
            compact_view: None,
        }
    }

    /// Asks the relay for `options` on each connection (batches, compact
    /// transforms).
    pub fn with_options(mut self, options: RelayOptions) -> Self {
        self.options = options;
        self
    }

    /// This connection's player id, once welcomed.
    pub fn player_id(&self) -> Option<u32> {
        self.player_id
    }

    /// Whether a redirect's ticket waits for the next connection (then
    /// connect at once, to where the redirect said).
    pub fn redirected(&self) -> bool {
        self.handover.is_some()
    }

    /// A connection opened: what to send first, in order (the hello or the
    /// ticket, then the options if they are not the defaults).
    pub fn opened(&mut self) -> Vec<Message> {
        self.player_id = None;
        let first = match self.handover.take() {
            Some(ticket) => Message::new(RelayChannel, RelayAction::Handover, &ticket),
            None => Message::new(RelayChannel, RelayAction::Hello, &self.hello),
        };
        let mut out: Vec<Message> = first.into_iter().collect();
        // A new connection's compact stream and view start from nothing.
        self.compact = self.options.compact.then(CompactDecoder::new);
        self.compact_view = self.options.compact_datagrams.then(ViewDecoder::new);
        if self.options != RelayOptions::default() {
            out.extend(Message::new(
                RelayChannel,
                RelayAction::Options,
                &self.options,
            ));
        }
        out
    }

    /// The connection ended: its player id and compact stream with it (a
    /// redirect's ticket stays for the next one).
    pub fn lost(&mut self) {
        self.player_id = None;
        self.compact = None;
        self.compact_view = None;
        self.view = View::default();
    }

    /// Whether this client asked for datagrams (plain, or compact ones):
    /// its own transforms then go on
    /// [`RelayMovesChannel`](crate::RelayMovesChannel), the rest on the
    /// relay channel.
    pub fn datagrams(&self) -> bool {
        (self.options.datagrams && !self.options.compact) || self.options.compact_datagrams
    }

    /// Reads `message` into events, in the order the relay wrote them.
    /// Messages of other channels are not the relay's: nothing.
    pub fn received(&mut self, message: &Message, mut each: impl FnMut(RelayClientEvent<'_>)) {
        let view = match message.channel_id() {
            crate::server::RELAY_CHANNEL => false,
            switchboard::message::RELAY_VIEW_CHANNEL => true,
            _ => return,
        };
        match message.action::<RelayAction>() {
            Some(RelayAction::Batch) => self.batch(message.content_bytes(), view, &mut each),
            Some(RelayAction::CompactView) if view => {
                self.compact_view(message.content_bytes(), &mut each)
            }
            _ if view => tracing::debug!("relay view message that is not a batch"),
            Some(RelayAction::Compact) => self.compact(message.content_bytes(), &mut each),
            _ => self.one(message.action_id(), message.content_bytes(), &mut each),
        }
    }

    /// One message that came alone, in a batch or among compact records.
    fn one(&mut self, action: u16, content: &[u8], each: &mut impl FnMut(RelayClientEvent<'_>)) {
        fn decoded<T: serde::de::DeserializeOwned>(
            content: &[u8],
            each: &mut impl FnMut(RelayClientEvent<'_>),
        ) -> Option<T> {
            match codec::decode_value(content) {
                Ok(value) => Some(value),
                Err(err) => {
                    each(RelayClientEvent::Broken(err.to_string()));
                    None
                }
            }
        }
        match RelayAction::from_id(action) {
            Some(RelayAction::Relayed) => {
                each(RelayClientEvent::Transform(Heard::Encoded(content)))
            }
            Some(RelayAction::Welcome) => {
                if let Some(id) = decoded::<u32>(content, each) {
                    self.player_id = Some(id);
                    each(RelayClientEvent::Welcome(id));
                }
            }
            Some(RelayAction::Left) => {
                if let Some(id) = decoded(content, each) {
                    each(RelayClientEvent::Left(id));
                }
            }
            Some(RelayAction::Notice) => {
                if let Some(text) = decoded(content, each) {
                    each(RelayClientEvent::Notice(text));
                }
            }
            Some(RelayAction::Error) => {
                if let Some(text) = decoded(content, each) {
                    each(RelayClientEvent::Error(text));
                }
            }
            Some(RelayAction::Redirect) => {
                // With the other relay's QUIC address when this client is
                // on QUIC.
                match Redirect::read(content) {
                    Ok(redirect) => {
                        self.handover = Some(redirect.ticket.clone());
                        each(RelayClientEvent::Redirect(redirect));
                    }
                    Err(err) => each(RelayClientEvent::Broken(err.to_string())),
                }
            }
            // What a relay does not send a client (its own requests, a
            // batch inside a batch), or an action this core does not know.
            _ => tracing::debug!(action, "relay message not used"),
        }
    }

    /// A [`Batch`](crate::Batch): its messages one by one.
    /// On the view channel (`view`), only others' transforms, each kept if
    /// newer than what the client has of its sender.
    fn batch(&mut self, content: &[u8], view: bool, each: &mut impl FnMut(RelayClientEvent<'_>)) {
        let Some((at, messages)) = batch_messages(content) else {
            each(RelayClientEvent::Broken(
                "a batch's head did not decode".into(),
            ));
            return;
        };
        let sorted = self.datagrams();
        if sorted {
            self.view.clock(at);
        }
        let batch = RelayAction::Batch.id();
        let compact = RelayAction::Compact.id();
        let relayed = RelayAction::Relayed.id();
        let left = RelayAction::Left.id();
        for (action, content) in messages.filter(|(a, _)| *a != batch && *a != compact) {
            if view && action != relayed {
                continue;
            }
            if sorted && action == relayed {
                let Some(peek) = peek_encoded(content, "") else {
                    each(RelayClientEvent::Broken(
                        "a transform did not decode".into(),
                    ));
                    continue;
                };
                if !self.view.take(peek.player_id, peek.server_time_ms) {
                    continue;
                }
            }
            if sorted && action == left {
                if let Ok(id) = codec::decode_value::<u32>(content) {
                    self.view.left(id, at);
                }
            }
            self.one(action, content, each);
        }
    }

    /// A compact frame, through this connection's decoder.
    fn compact(&mut self, content: &[u8], each: &mut impl FnMut(RelayClientEvent<'_>)) {
        let Some(mut decoder) = self.compact.take() else {
            each(RelayClientEvent::Broken(
                "compact records the client did not ask for".into(),
            ));
            return;
        };
        let read = decoder.read(content, |record| match record {
            CompactRecord::Transform {
                player_id,
                server_time_ms,
                transform,
                extra_changed,
            } => each(RelayClientEvent::Transform(Heard::Compact {
                player_id,
                server_time_ms,
                transform,
                extra_changed,
            })),
            CompactRecord::Left { player_id } => each(RelayClientEvent::Left(player_id)),
            CompactRecord::Message { action, content } => self.one(action, content, each),
        });
        match read {
            Ok(_) => self.compact = Some(decoder),
            Err(err) => each(RelayClientEvent::Broken(err.to_string())),
        }
    }
}

/// [`Heard::peek`] of a `Relayed` content.
fn peek_encoded<'a>(content: &'a [u8], field: &str) -> Option<Peek<'a>> {
    let mut at = Reader(content);
    let player_id = u32::try_from(at.varint()?).ok()?;
    let server_time_ms = at.varint()?;
    let mut position = [0f32; 3];
    for axis in &mut position {
        *axis = f32::from_le_bytes(at.take(4)?.try_into().ok()?);
    }
    at.skip(12)?; // rotation: three f32
    let zone = at.varint()?;
    at.skip(usize::try_from(zone).ok()?)?;
    match at.byte()? {
        0 => {}
        1 => at.skip(9)?, // MovementState: five bools and an f32
        _ => return None,
    }
    let mut value = None;
    for _ in 0..at.varint()? {
        let key = at.text()?;
        let text = at.text()?;
        if key == field.as_bytes() {
            value = Some(std::str::from_utf8(text).ok()?);
        }
    }
    Some(Peek {
        player_id,
        server_time_ms,
        position,
        field: value,
    })
}

/// A `Batch`'s relay clock and its messages, (action, content) each, read
/// in place; `None` if its head does not decode. The iterator stops at the
/// first entry that does not.
pub(crate) fn batch_messages(content: &[u8]) -> Option<(u64, impl Iterator<Item = (u16, &[u8])>)> {
    let mut at = Reader(content);
    at.varint()?; // tick
    let server_time_ms = at.varint()?;
    let count = at.varint()?;
    let messages = (0..count).map_while(move |_| {
        let action = u16::try_from(at.varint()?).ok()?;
        Some((action, at.text()?))
    });
    Some((server_time_ms, messages))
}

#[cfg(test)]
mod tests;
mod view;

use view::View;
#[cfg(test)]
use view::VIEW_MEMORY_MS;
