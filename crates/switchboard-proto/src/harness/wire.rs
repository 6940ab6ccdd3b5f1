//! How the harness carries things: client actions and manager actions become
//! deliveries, in one queue, in order, until nothing moves.

use super::*;
use crate::manager::ShareError;

impl<L: GameLogic> Harness<L> {
    /// Carries every message and event until nothing moves.
    pub(super) fn settle(&mut self) {
        loop {
            for index in 0..self.clients.len() {
                self.run_client_actions(index);
            }
            // What a simulated link let through is handled as it is; what
            // is new goes into its client's link first, if it has one.
            let delivery = if let Some(delivery) = self.arrived.pop_front() {
                delivery
            } else {
                let Some(delivery) = self.queue.pop_front() else {
                    break;
                };
                if let Some(index) = self.stalled_end(&delivery) {
                    self.clients[index].held.push(delivery);
                    continue;
                }
                if let Some((index, way)) = self.simulated_end(&delivery) {
                    let since = self.now.saturating_duration_since(self.origin);
                    if let Some(links) = &mut self.clients[index].network {
                        links[way].send(since, delivery, 64);
                    }
                    continue;
                }
                delivery
            };
            let now = self.now;
            match delivery {
                Delivery::ToServer(event) => {
                    let actions: Vec<ManagerAction> = self.server.handle(event, now).collect();
                    self.route_server(actions);
                }
                Delivery::ToClient(index, event) => {
                    let client = &mut self.clients[index];
                    client.core.handle(event, now);
                    while let Some(event) = client.core.poll_event() {
                        client.events.push(event);
                    }
                }
            }
        }
    }

    /// The stalled client a delivery goes to or comes from, if any.
    fn stalled_end(&self, delivery: &Delivery) -> Option<usize> {
        let index = match delivery {
            Delivery::ToClient(index, _) => *index,
            Delivery::ToServer(ManagerEvent::Received { peer, .. }) => match self.links.get(peer) {
                Some(End::Client(index)) => *index,
                _ => return None,
            },
            Delivery::ToServer(_) => return None,
        };
        self.clients[index].stalled.then_some(index)
    }

    /// The client behind a simulated network a delivery goes to (way 1) or
    /// comes from (way 0), if any.
    fn simulated_end(&self, delivery: &Delivery) -> Option<(usize, usize)> {
        let (index, way) = match delivery {
            Delivery::ToClient(index, _) => (*index, 1),
            Delivery::ToServer(
                ManagerEvent::Received { peer, .. }
                | ManagerEvent::Connected { peer, .. }
                | ManagerEvent::Disconnected { peer, .. },
            ) => match self.client_of(*peer) {
                Some(index) => (index, 0),
                None => return None,
            },
            Delivery::ToServer(_) => return None,
        };
        self.clients[index]
            .network
            .is_some()
            .then_some((index, way))
    }

    /// The client whose connection `peer` is (or was: a closed one is
    /// still its client's last peer until it reconnects).
    fn client_of(&self, peer: PeerId) -> Option<usize> {
        match self.links.get(&peer) {
            Some(End::Client(index)) => Some(*index),
            Some(End::Raw) => None,
            None => self.clients.iter().position(|c| c.peer == Some(peer)),
        }
    }

    fn run_client_actions(&mut self, index: usize) {
        while let Some(action) = self.clients[index].core.poll_action() {
            match action {
                ClientAction::Connect => self.connect_client(index),
                ClientAction::Send(message) => {
                    if let Some(peer) = self.clients[index].peer {
                        self.queue
                            .push_back(Delivery::ToServer(ManagerEvent::Received {
                                peer,
                                message,
                            }));
                    }
                }
                ClientAction::Close(reason) => {
                    if let Some(peer) = self.clients[index].peer.take() {
                        self.links.remove(&peer);
                        let code = CloseCode::NORMAL;
                        self.queue
                            .push_back(Delivery::ToServer(ManagerEvent::Disconnected {
                                peer,
                                reason: DisconnectReason::ClosedByPeer {
                                    code,
                                    reason: reason.clone(),
                                },
                            }));
                        self.queue.push_back(Delivery::ToClient(
                            index,
                            SocketEvent::Disconnected(DisconnectReason::Closed { code, reason }),
                        ));
                    }
                }
            }
        }
        let client = &mut self.clients[index];
        while let Some(event) = client.core.poll_event() {
            client.events.push(event);
        }
    }

    fn connect_client(&mut self, index: usize) {
        if !self.clients[index].reachable {
            let refused = DisconnectReason::ConnectFailed(IoFailure::new(
                ErrorKind::ConnectionRefused,
                "connection refused",
            ));
            self.queue.push_back(Delivery::ToClient(
                index,
                SocketEvent::Disconnected(refused),
            ));
            return;
        }
        let peer = self.new_peer();
        self.links.insert(peer, End::Client(index));
        let addr = self.clients[index].addr;
        self.clients[index].peer = Some(peer);
        self.queue
            .push_back(Delivery::ToServer(ManagerEvent::Connected { peer, addr }));
        self.queue
            .push_back(Delivery::ToClient(index, SocketEvent::Connected));
    }

    pub(super) fn new_peer(&mut self) -> PeerId {
        let peer = PeerId(self.next_peer);
        self.next_peer += 1;
        peer
    }

    pub(super) fn route_server(&mut self, actions: Vec<ManagerAction>) {
        for action in actions {
            match action {
                ManagerAction::Send { peer, message } => self.deliver_to(peer, message),
                ManagerAction::SendToMany { peers, message } => {
                    for peer in peers {
                        self.deliver_to(peer, message.clone());
                    }
                }
                ManagerAction::Close { peer, code, reason } => self.close_peer(peer, code, reason),
                ManagerAction::Log(entry) => self.log.push(entry),
                // The harness has no store shared with other processes: a
                // claim gets that answer, writes go nowhere.
                ManagerAction::Claim {
                    peer,
                    client,
                    new_token,
                    ..
                } => self
                    .queue
                    .push_back(Delivery::ToServer(ManagerEvent::Claimed {
                        peer,
                        client,
                        new_token,
                        result: Err(ShareError(
                            "the in-memory harness has no shared store".into(),
                        )),
                    })),
                ManagerAction::Share(_) | ManagerAction::Checkpoint(_) => {}
            }
        }
    }

    fn deliver_to(&mut self, peer: PeerId, message: Message) {
        match self.links.get(&peer) {
            Some(End::Client(index)) => self
                .queue
                .push_back(Delivery::ToClient(*index, SocketEvent::Received(message))),
            Some(End::Raw) => {
                if let Some(raw) = self.raw.get_mut(&peer) {
                    raw.inbox.push(message);
                }
            }
            None => {}
        }
    }

    /// The server closes a connection: the far end hears why, and the
    /// server hears that it is gone.
    fn close_peer(&mut self, peer: PeerId, code: CloseCode, reason: String) {
        let Some(end) = self.links.remove(&peer) else {
            return;
        };
        let by_server = DisconnectReason::ClosedByPeer {
            code,
            reason: reason.clone(),
        };
        match end {
            End::Client(index) => {
                self.clients[index].peer = None;
                self.queue.push_back(Delivery::ToClient(
                    index,
                    SocketEvent::Disconnected(by_server),
                ));
            }
            End::Raw => {
                if let Some(raw) = self.raw.get_mut(&peer) {
                    raw.closed = Some(by_server);
                }
            }
        }
        self.queue
            .push_back(Delivery::ToServer(ManagerEvent::Disconnected {
                peer,
                reason: DisconnectReason::Closed { code, reason },
            }));
    }
}
