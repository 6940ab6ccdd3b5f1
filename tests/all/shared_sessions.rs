//! The manager's rules for sessions shared with other processes, in memory:
//! the core is driven event by event and the store's answers are made up
//! here, so every branch (taken over, unknown, store down, too many lookups,
//! moved away) is decided the same way each run. The real store is tested
//! against a real Redis in `switchboard-redis`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use switchboard::manager::protocol::{self, Refused, Resume, SessionHello, Welcome};
use switchboard::manager::{
    ManagerAction, ManagerCore, ManagerEvent, ManagerRules, ShareError, ShareUpdate, SharedSession,
};
use switchboard::session::ReconnectToken;
use switchboard::session::Seeded;
use switchboard::socket::{CloseCode, DisconnectReason, PeerId};
use switchboard::{ClientId, GameLogic, Message, Outbox, Rejection, Request};

/// Hears who joins, comes back and leaves.
#[derive(Default)]
struct Seen {
    joined: Vec<ClientId>,
    back: Vec<ClientId>,
    left: Vec<ClientId>,
}

impl GameLogic for Seen {
    type Message = switchboard::Message;
    type Command = ();
    fn validate(&self, _: &Request) -> Result<(), Rejection> {
        Ok(())
    }
    fn apply(&mut self, _: ClientId, _: (), _: &mut Outbox) {}
    fn on_join(&mut self, client: ClientId, _: &str, _: &mut Outbox) {
        self.joined.push(client);
    }
    fn on_reconnect(&mut self, client: ClientId, _: &mut Outbox) {
        self.back.push(client);
    }
    fn on_leave(&mut self, client: ClientId, _: &mut Outbox) {
        self.left.push(client);
    }
}

const GRACE: Duration = Duration::from_secs(30);

fn core(max_pending_claims: usize) -> ManagerCore<Seen> {
    let mut rules = ManagerRules {
        max_pending_claims,
        ..ManagerRules::default()
    };
    rules.sessions.grace_period = GRACE;
    ManagerCore::new(rules, Seen::default(), Box::new(Seeded::new(1))).with_shared_sessions(true)
}

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 5000))
}

fn hello(resume: Option<Resume>) -> Message {
    let hello = SessionHello {
        name: "ada".into(),
        password: None,
        credentials: Vec::new(),
        resume,
    };
    protocol::session_message(protocol::HELLO, &hello)
}

/// Connects `peer` and sends its hello; returns the actions.
fn connect(
    core: &mut ManagerCore<Seen>,
    peer: PeerId,
    resume: Option<Resume>,
    now: Instant,
) -> Vec<ManagerAction> {
    let connected = ManagerEvent::Connected {
        peer,
        addr: addr(peer.0 as u8),
    };
    let _ = core.handle(connected, now).count();
    let message = hello(resume);
    core.handle(ManagerEvent::Received { peer, message }, now)
        .collect()
}

fn session_reply<T: serde::de::DeserializeOwned>(
    actions: &[ManagerAction],
    action: u16,
) -> Option<T> {
    actions.iter().find_map(|a| match a {
        ManagerAction::Send { message, .. } if message.action_id() == action => {
            message.content().ok()
        }
        _ => None,
    })
}

fn shares(actions: &[ManagerAction]) -> Vec<ShareUpdate> {
    actions
        .iter()
        .filter_map(|a| match a {
            ManagerAction::Share(update) => Some(update.clone()),
            _ => None,
        })
        .collect()
}

fn claim_of(actions: &[ManagerAction]) -> (PeerId, ClientId, ReconnectToken, ReconnectToken) {
    actions
        .iter()
        .find_map(|a| match a {
            ManagerAction::Claim {
                peer,
                client,
                token,
                new_token,
            } => Some((*peer, *client, token.clone(), new_token.clone())),
            _ => None,
        })
        .expect("a claim")
}

fn stranger() -> Resume {
    Resume {
        client: ClientId::from_u128(7),
        token: ReconnectToken([7; 32]),
    }
}

#[test]
fn a_new_session_is_written_online_then_offline_then_gone() {
    let t0 = Instant::now();
    let mut core = core(8);
    let actions = connect(&mut core, PeerId(1), None, t0);
    let welcome: Welcome = session_reply(&actions, protocol::WELCOME).unwrap();
    let written = shares(&actions);
    let [ShareUpdate::Online { session, token }] = written.as_slice() else {
        panic!("{actions:?}");
    };
    assert_eq!(
        (session.client, session.name.as_str()),
        (welcome.client, "ada")
    );
    assert!(
        token.matches(&welcome.token),
        "the store gets the current token"
    );

    let lost = ManagerEvent::Disconnected {
        peer: PeerId(1),
        reason: DisconnectReason::IdleTimeout,
    };
    let actions: Vec<_> = core.handle(lost, t0).collect();
    assert_eq!(
        shares(&actions),
        [ShareUpdate::Offline {
            client: welcome.client
        }]
    );
    let actions: Vec<_> = core
        .tick(t0 + GRACE + Duration::from_secs(1), |_| None)
        .collect();
    assert_eq!(
        shares(&actions),
        [ShareUpdate::Gone {
            client: welcome.client
        }]
    );
}

#[test]
fn a_session_held_elsewhere_is_claimed_and_welcomed_with_the_same_id() {
    let t0 = Instant::now();
    let mut core = core(8);
    let resume = stranger();
    let actions = connect(&mut core, PeerId(1), Some(resume.clone()), t0);
    assert!(
        session_reply::<Welcome>(&actions, protocol::WELCOME).is_none(),
        "no answer before the store's"
    );
    let (peer, client, token, new_token) = claim_of(&actions);
    assert_eq!((peer, client), (PeerId(1), resume.client));
    assert!(token.matches(&resume.token));

    let found = SharedSession {
        client,
        name: "ada".into(),
        from: addr(9).ip(),
        reconnects: 1,
    };
    let claimed = ManagerEvent::Claimed {
        peer,
        client,
        new_token: new_token.clone(),
        result: Ok(Some(found)),
    };
    let actions: Vec<_> = core.handle(claimed, t0).collect();
    let welcome: Welcome = session_reply(&actions, protocol::WELCOME).unwrap();
    assert_eq!(welcome.client, resume.client, "the same id");
    assert!(welcome.resumed);
    assert!(
        welcome.token.matches(&new_token),
        "the token the claim wrote"
    );
    assert_eq!(
        core.logic().back,
        [resume.client],
        "the game hears it come back"
    );
    assert!(core.logic().joined.is_empty());
    assert_eq!(core.players(), 1);
}

#[test]
fn a_claim_the_store_denies_or_cannot_answer_is_refused_with_a_stable_reason() {
    let t0 = Instant::now();
    let mut core = core(8);
    for (peer, result, code) in [
        (PeerId(1), Ok(None), 1),
        (
            PeerId(2),
            Err(ShareError("redis unavailable: refused".into())),
            10,
        ),
    ] {
        let actions = connect(&mut core, peer, Some(stranger()), t0);
        let (_, client, _, new_token) = claim_of(&actions);
        let claimed = ManagerEvent::Claimed {
            peer,
            client,
            new_token,
            result,
        };
        let actions: Vec<_> = core.handle(claimed, t0).collect();
        let refused: Refused = session_reply(&actions, protocol::REFUSED).unwrap();
        assert_eq!(refused.code, code, "{refused:?}");
        if code == 10 {
            // The store's own error text stays in the server's log.
            assert!(!refused.reason.contains("redis"), "{refused:?}");
            assert!(refused.reason.contains("retry shortly"), "{refused:?}");
        }
        assert!(shares(&actions).is_empty(), "nothing written on a refusal");
    }
    assert_eq!(core.players(), 0);
}

#[test]
fn a_flood_of_made_up_resumes_is_bounded_by_max_pending_claims() {
    let t0 = Instant::now();
    let mut core = core(2);
    let mut claims = 0;
    for n in 1..=5 {
        let actions = connect(&mut core, PeerId(n), Some(stranger()), t0);
        let claimed = actions
            .iter()
            .any(|a| matches!(a, ManagerAction::Claim { .. }));
        if claimed {
            claims += 1;
        } else {
            let refused: Refused = session_reply(&actions, protocol::REFUSED).unwrap();
            assert_eq!(refused.code, 10);
        }
    }
    assert_eq!(claims, 2, "two lookups at once, the rest refused at once");
    // A second hello on a connection waiting for its claim is an error,
    // not a second lookup.
    let again = hello(Some(stranger()));
    let actions: Vec<_> = core
        .handle(
            ManagerEvent::Received {
                peer: PeerId(1),
                message: again,
            },
            t0,
        )
        .collect();
    assert!(!actions
        .iter()
        .any(|a| matches!(a, ManagerAction::Claim { .. })));
}

#[test]
fn a_session_taken_over_elsewhere_ends_here_and_its_connection_closes() {
    let t0 = Instant::now();
    let mut core = core(8);
    let actions = connect(&mut core, PeerId(1), None, t0);
    let welcome: Welcome = session_reply(&actions, protocol::WELCOME).unwrap();
    let moved = ManagerEvent::MovedAway {
        clients: vec![welcome.client],
    };
    let actions: Vec<_> = core.handle(moved, t0).collect();
    assert!(actions.iter().any(|a| matches!(
        a,
        ManagerAction::Close { peer: PeerId(1), code, .. } if *code == CloseCode::REPLACED
    )));
    assert_eq!(core.logic().left, [welcome.client]);
    assert_eq!(core.players(), 0);
    // Its connection's end afterwards writes nothing: it is not ours.
    let closed = ManagerEvent::Disconnected {
        peer: PeerId(1),
        reason: DisconnectReason::IdleTimeout,
    };
    assert!(shares(&core.handle(closed, t0).collect::<Vec<_>>()).is_empty());
}

#[test]
fn online_sessions_are_written_again_every_third_of_the_grace_period() {
    let t0 = Instant::now();
    let mut core = core(8);
    let _ = connect(&mut core, PeerId(1), None, t0);
    let count = |core: &mut ManagerCore<Seen>, at: Instant| {
        shares(&core.tick(at, |_| None).collect::<Vec<_>>()).len()
    };
    assert_eq!(count(&mut core, t0), 1, "the first tick writes it");
    assert_eq!(count(&mut core, t0 + GRACE / 6), 0);
    assert_eq!(count(&mut core, t0 + GRACE / 3), 1, "a third later, again");
}
