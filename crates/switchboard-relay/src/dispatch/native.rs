//! What a native player's connection says: its hello or handover ticket,
//! its options, its transforms (on the stream, or as datagrams on the
//! moves channel) and its acknowledgements of compact view datagrams.

use super::*;
use crate::compact::ViewAck;
use crate::zones::Handover;
use switchboard::message::Message;

/// A native connection's player, and what it said of itself.
#[derive(Debug)]
pub(super) struct Peer {
    pub(super) id: u32,
    /// Its hello or its ticket was read.
    greeted: bool,
    /// Its transforms on the moves channel read before that (a datagram
    /// can overtake the stream), the newest `RelayConfig::early_moves` at
    /// most: they wait for the greeting, so that a handed-over player's
    /// first move does not put it in a zone under its connection's id
    /// before its ticket is read.
    early: Vec<Transform>,
    /// On WebTransport, it follows redirects over WebTransport
    /// (`RelayOptions::webtransport_redirects`).
    pub(super) webtransport_redirects: bool,
}

impl Peer {
    pub(super) fn new(id: u32) -> Peer {
        Peer {
            id,
            greeted: false,
            early: Vec::new(),
            webtransport_redirects: false,
        }
    }
}

impl Dispatch {
    /// One message from a native player's connection.
    pub(super) fn on_message(&mut self, peer: PeerId, message: Message) -> Vec<Outgoing> {
        let now_ms = self.now_ms();
        let Some(Peer { id, greeted, .. }) = self.ids.get(&peer) else {
            return Vec::new();
        };
        let (id, greeted) = (*id, *greeted);
        let error = |text: &str| {
            let _ = self
                .handle
                .send_value_to(peer, RelayChannel, RelayAction::Error, text);
            Vec::new()
        };
        // A datagram client's own transforms come on the moves channel
        // (`RelayOptions::datagrams`).
        let moves = message.channel_id() == switchboard::message::RELAY_MOVES_CHANNEL;
        match (
            message.channel::<RelayChannel>(),
            message.action::<RelayAction>(),
        ) {
            (relay, Some(RelayAction::Transform)) if relay.is_some() || moves => {
                match message.content::<Transform>() {
                    Ok(transform) if moves && !greeted => {
                        let keep = self.config.early_moves;
                        if let Some(held) = self.ids.get_mut(&peer).filter(|_| keep > 0) {
                            if held.early.len() >= keep {
                                held.early.remove(0);
                            }
                            held.early.push(transform);
                        }
                        Vec::new()
                    }
                    Ok(transform) => self.route_native(peer, id, transform, now_ms),
                    Err(err) => error(&err.to_string()),
                }
            }
            (relay, Some(RelayAction::ViewAck)) if relay.is_some() || moves => {
                match ViewAck::read(message.content_bytes()) {
                    Some(ack) => {
                        self.batches.ack(peer, ack);
                        Vec::new()
                    }
                    None => error("a view acknowledgement that does not read"),
                }
            }
            (Some(_), Some(RelayAction::Handover)) => {
                let mut out = match message.content::<Handover>() {
                    Ok(ticket) => self.take_handover(peer, id, &ticket),
                    Err(err) => error(&err.to_string()),
                };
                out.extend(self.greeted(peer, now_ms));
                out
            }
            (Some(_), Some(RelayAction::Options)) => {
                match crate::server::RelayOptions::read(message.content_bytes()) {
                    Ok(options) => {
                        // What waits in the old form leaves first.
                        self.queue_batches(&[peer]);
                        self.batches.set(peer, options);
                        if let Some(held) = self.ids.get_mut(&peer) {
                            held.webtransport_redirects = options.webtransport_redirects;
                        }
                        Vec::new()
                    }
                    Err(err) => error(&err.to_string()),
                }
            }
            (Some(_), Some(RelayAction::Hello)) => {
                if let Ok(hello) = message.content::<RelayHello>() {
                    self.relay.describe(id, &hello.name, hello.bot);
                    let kind = if hello.bot { "a bot" } else { "a player" };
                    let name = crate::hub::display_name(&hello.name);
                    let name = name.escape_debug();
                    self.log.info(format!("player {id} is \"{name}\" ({kind})"));
                }
                self.greeted(peer, now_ms)
            }
            _ => error("unknown channel or action"),
        }
    }

    /// `peer`'s hello or ticket was read: the moves that overtook it go on,
    /// in order, under the id the connection now has.
    fn greeted(&mut self, peer: PeerId, now_ms: u64) -> Vec<Outgoing> {
        let Some(held) = self.ids.get_mut(&peer) else {
            return Vec::new();
        };
        held.greeted = true;
        let id = held.id;
        let early = std::mem::take(&mut held.early);
        let mut out = Vec::new();
        for transform in early {
            out.extend(self.route_native(peer, id, transform, now_ms));
        }
        out
    }
}
