//! The dispatch's part in zones across relays (`crate::zones`): a native
//! player's transform routed to its zone's relay, the player handed over
//! with a ticket, and a ticket from another relay honoured.

use super::*;
use crate::zones::{Redirect, RedirectForm, Verdict};
use switchboard::message::{Action as _, Channel as _};

impl Dispatch {
    /// A native player's transform: relayed here, or the player handed
    /// over to its zone's relay, or held until the directory answers.
    pub(super) fn route(&mut self, id: u32, transform: Transform, now_ms: u64) -> Vec<Outgoing> {
        let Some(zones) = &mut self.zones else {
            return self.relay.transform(id, transform, now_ms);
        };
        // Rate and shape first: a transform refused here never waits for
        // the directory, nor makes it look a zone up.
        if !self.relay.admit(id, &transform, now_ms) {
            return Vec::new();
        }
        match zones.route(id, transform) {
            Verdict::Here(transform) => self.relay.relay_admitted(id, transform, now_ms),
            Verdict::Elsewhere(owner, transform) => self.hand_over(id, &owner, transform, now_ms),
            Verdict::Waiting => Vec::new(),
        }
    }

    /// The directory said where `zone` lives: the transforms that waited
    /// for it go on.
    pub(super) fn on_zone_answer(
        &mut self,
        zone: String,
        owner: Result<ZoneOwner, String>,
    ) -> Vec<Outgoing> {
        let now_ms = self.now_ms();
        let Some(zones) = &mut self.zones else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (id, verdict) in zones.answered(zone, owner) {
            match verdict {
                Verdict::Here(transform) => {
                    out.extend(self.relay.relay_admitted(id, transform, now_ms))
                }
                Verdict::Elsewhere(owner, transform) => {
                    out.extend(self.hand_over(id, &owner, transform, now_ms))
                }
                Verdict::Waiting => {}
            }
        }
        out
    }

    /// Sends `id` to `owner` with a ticket that keeps its id there; it
    /// leaves here (those who saw it are told). A player that cannot follow
    /// (a JSON client; a browser when the zone's relay has no WebSocket
    /// listener, nor WebTransport for one that follows it there) is served
    /// here instead.
    fn hand_over(
        &mut self,
        id: u32,
        owner: &ZoneOwner,
        transform: Transform,
        now_ms: u64,
    ) -> Vec<Outgoing> {
        let (peer, form) = match (&self.zones, self.routes.get(&id)) {
            (Some(_), Some(Route::Native(peer))) => (*peer, self.redirect_form(*peer)),
            _ => return self.relay.relay_admitted(id, transform, now_ms),
        };
        let reachable = match form {
            None => false,
            Some(RedirectForm::WebTransport) => {
                owner.websocket.is_some() || owner.webtransport.is_some()
            }
            Some(_) => owner.websocket.is_some() || !self.is_browser(peer),
        };
        let (true, Some(zones)) = (reachable, &mut self.zones) else {
            return self.relay.relay_admitted(id, transform, now_ms);
        };
        let (name, bot) = self
            .relay
            .player(id)
            .map(|p| (p.name.clone(), p.is_bot))
            .unwrap_or_default();
        let redirect = Redirect {
            addr: owner.addr.clone(),
            websocket: owner.websocket.clone(),
            ticket: zones.ticket(id, &name, bot, owner),
            quic: owner.quic.clone(),
            webtransport: owner.webtransport.clone(),
        };
        zones.forget(id);
        if let (Some(handle), Some(form)) = (self.handle.peer(peer), form) {
            if let Ok(content) = redirect.encode(form) {
                let _ = handle.send(&switchboard::Message::from_raw(
                    RelayChannel.id(),
                    RelayAction::Redirect.id(),
                    content.into(),
                ));
            }
        }
        self.handle
            .close_peer(peer, "handed over to the relay of its zone");
        self.log.info(format!(
            "player {id} handed over to relay {} at {}",
            owner.process, owner.addr
        ));
        self.routes.remove(&id);
        self.ids.remove(&peer);
        self.leave(id)
    }

    /// What a redirect to `peer` carries: the QUIC address to a player on
    /// QUIC or WebTransport, and the WebTransport hashes to a WebTransport
    /// player that follows them. `None`: the peer is gone.
    fn redirect_form(&self, peer: PeerId) -> Option<RedirectForm> {
        let handle = self.handle.peer(peer)?;
        Some(if handle.is_webtransport() {
            if self
                .ids
                .get(&peer)
                .is_some_and(|p| p.webtransport_redirects)
            {
                RedirectForm::WebTransport
            } else {
                RedirectForm::Quic
            }
        } else if handle.is_quic() {
            RedirectForm::Quic
        } else {
            RedirectForm::Plain
        })
    }

    /// Whether `peer` is a browser (WebSocket or WebTransport).
    fn is_browser(&self, peer: PeerId) -> bool {
        self.handle
            .peer(peer)
            .is_some_and(|h| h.is_websocket() || h.is_webtransport())
    }

    /// A player handed over from another relay presents its ticket: it
    /// takes the id the ticket names (or is told why not).
    pub(super) fn take_handover(
        &mut self,
        peer: PeerId,
        id: u32,
        ticket: &Handover,
    ) -> Vec<Outgoing> {
        let refused = match &mut self.zones {
            None => Some("this relay takes no handovers"),
            Some(zones) => zones.take(ticket).err(),
        }
        .or_else(|| {
            (!self.relay.take_id(id, ticket.player_id))
                .then_some("that player id is in use here, or you are already in a zone")
        });
        if let Some(why) = refused {
            let _ = self
                .handle
                .send_value_to(peer, RelayChannel, RelayAction::Error, why);
            return Vec::new();
        }
        let new_id = ticket.player_id;
        self.relay.describe(new_id, &ticket.name, ticket.bot);
        if let Some(route) = self.routes.remove(&id) {
            self.routes.insert(new_id, route);
        }
        if let Some(peer) = self.ids.get_mut(&peer) {
            peer.id = new_id;
        }
        let _ = self
            .handle
            .send_value_to(peer, RelayChannel, RelayAction::Welcome, &new_id);
        let name = ticket.name.escape_debug();
        self.log.info(format!(
            "player {new_id} (\"{name}\") handed over to this relay"
        ));
        Vec::new()
    }
}
