//! A test player in the test's process: a `NetworkClient` speaking the
//! strategy game's protocol, with the last view and lobby it heard.

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use strategy::protocol::{Chan, GameAct, LobbyAct, LobbyView, Msg, NationView};
use switchboard::{ClientConfig, NetworkClient, ReconnectPolicy, RequestStatus};

/// How long a test waits for anything.
pub const WAIT: Duration = Duration::from_secs(15);

/// A test player: the client and the last view and lobby it got.
pub struct Player {
    pub client: NetworkClient,
    pub view: Rc<RefCell<Option<NationView>>>,
    pub lobby: Rc<RefCell<Option<LobbyView>>>,
}

impl Player {
    pub fn join(addr: impl ToString, name: &str) -> Player {
        let config = ClientConfig {
            reconnect: ReconnectPolicy {
                initial_delay: Duration::from_millis(50),
                ..Default::default()
            },
            ..ClientConfig::named(name)
        };
        let client =
            NetworkClient::connect_via(switchboard_hosting::JoinCodes::dialer(), addr, config);
        let view = Rc::new(RefCell::new(None));
        let lobby = Rc::new(RefCell::new(None));
        let (v, l) = (view.clone(), lobby.clone());
        client.subscribe(Chan::Game, move |d| {
            if let Ok(GameAct::View(view)) = d.typed() {
                *v.borrow_mut() = Some(view);
            }
        });
        client.subscribe(Chan::Lobby, move |d| {
            if let Ok(LobbyAct::State(lobby)) = d.typed() {
                *l.borrow_mut() = Some(lobby);
            }
        });
        let mut player = Player {
            client,
            view,
            lobby,
        };
        player.until(|p| p.client.is_welcomed() && p.view.borrow().is_some());
        player
    }

    pub fn until(&mut self, mut done: impl FnMut(&Player) -> bool) {
        let deadline = Instant::now() + WAIT;
        while !done(self) {
            assert!(Instant::now() < deadline, "condition not reached in time");
            self.client.poll_timeout(Duration::from_millis(5));
        }
    }

    pub fn ask(&mut self, order: impl Into<Msg>) -> RequestStatus {
        let ticket = self.client.request(order.into()).unwrap();
        self.until(|p| p.client.status(ticket).is_done());
        self.client.status(ticket)
    }

    /// Waits until its view says it plays `nation` (the game started, or
    /// it came back to it).
    pub fn until_playing(&mut self, nation: u8) {
        let nation = Some(strategy::scenario::NationId(nation));
        self.until(|p| p.view.borrow().as_ref().is_some_and(|v| v.you == nation));
    }

    /// The id of one of `nation`'s units in the last view.
    pub fn unit_of(&self, nation: u8) -> strategy::scenario::UnitId {
        let nation = strategy::scenario::NationId(nation);
        let view = self.view();
        view.units.iter().find(|u| u.nation == nation).unwrap().id
    }

    pub fn view(&self) -> NationView {
        self.view.borrow().clone().unwrap()
    }
}
