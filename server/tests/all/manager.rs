//! The manager's rules in memory (the harness: client cores and a manager
//! core, no socket, a clock the test moves): sessions, reconnects, validated
//! requests, addressed updates, refusals, abuse, rate limits, timeouts.
//! What is about sockets (a real cut, shutdown flushing, a silent server) is
//! in `manager_loopback.rs`.
//! The attacks' tests are in `manager/abuse.rs`, a module of this binary
//! sharing the helpers at the top.

use std::time::{Duration, Instant};

use bytes::Bytes;
use switchboard::harness::{Harness, Player};
use switchboard::manager::protocol::{
    self, ErrorCode, ErrorReply, Refused, RequestFrame, Resume, SessionHello, Welcome,
};
use switchboard::session::{RateLimit, ReconnectToken};
use switchboard::{
    ClientConfig, ClientEvent, CloseCode, DisconnectReason, ManagerRules, Message, ReconnectPolicy,
    RequestError, RequestStatus, Welcomed,
};
use switchboard_server::board::{Board, BoardLogic, Line, Presence, Seats, Snapshot, Whisper};

/// Everything a test client heard, sorted by kind.
#[derive(Default, Debug)]
struct Heard {
    lines: Vec<Line>,
    seats: Vec<Seats>,
    snapshots: Vec<Snapshot>,
    presence: Vec<Presence>,
    verdicts: Vec<(switchboard::RequestTicket, RequestStatus)>,
    welcomed: Vec<Welcomed>,
    refused: Vec<Refused>,
    lost: Vec<DisconnectReason>,
    disconnected: Vec<DisconnectReason>,
}

fn heard(net: &mut Harness<BoardLogic>, player: Player) -> Heard {
    let mut heard = Heard::default();
    for event in net.events(player) {
        match event {
            ClientEvent::Message(m) => match m.typed::<Board>().unwrap() {
                Board::Line(line) => heard.lines.push(line),
                Board::Seats(seats) => heard.seats.push(seats),
                Board::Snapshot(snapshot) => heard.snapshots.push(snapshot),
                Board::Presence(presence) => heard.presence.push(presence),
                _ => {}
            },
            ClientEvent::RequestDone { ticket, status } => heard.verdicts.push((ticket, status)),
            ClientEvent::Welcomed(w) => heard.welcomed.push(w),
            ClientEvent::Refused(r) => heard.refused.push(r),
            ClientEvent::ConnectionLost(r) => heard.lost.push(r),
            ClientEvent::Disconnected(r) => heard.disconnected.push(r),
            _ => {}
        }
    }
    heard
}

fn board(config: ManagerRules) -> Harness<BoardLogic> {
    Harness::new(config, BoardLogic::new(4), Instant::now())
}

fn named(name: &str) -> ClientConfig {
    ClientConfig {
        reconnect: ReconnectPolicy {
            initial_delay: Duration::from_millis(50),
            ..Default::default()
        },
        ..ClientConfig::named(name)
    }
}

/// Sends a request and returns its verdict (everything it causes is
/// delivered before `request` returns).
fn ask(net: &mut Harness<BoardLogic>, player: Player, request: Board) -> RequestStatus {
    let ticket = net.request(player, request).unwrap();
    let verdict = net.verdict(player, ticket);
    assert!(
        verdict.is_done(),
        "the verdict is delivered with the request"
    );
    verdict
}

/// A raw connection's next session message, as (action, message).
fn session_replies(
    net: &mut Harness<BoardLogic>,
    peer: switchboard::PeerId,
) -> Vec<(u16, Message)> {
    net.raw_inbox(peer)
        .into_iter()
        .filter(|m| m.channel_id() == 1)
        .map(|m| (m.action_id(), m))
        .collect()
}

fn hello(resume: Option<Resume>) -> Message {
    let hello = SessionHello {
        name: "raw".into(),
        password: None,
        credentials: vec![],
        resume,
    };
    protocol::session_message(protocol::HELLO, &hello)
}

#[test]
fn accepted_update_reaches_exactly_the_clients_it_is_addressed_to() {
    let mut net = board(ManagerRules::default());
    let (ann, bob, cat) = (
        net.join(named("ann")),
        net.join(named("bob")),
        net.join(named("cat")),
    );
    let bob_id = net.client(bob).client_id().unwrap();
    let whisper = Whisper {
        to: bob_id,
        text: "psst, bob".into(),
    };
    assert_eq!(
        ask(&mut net, ann, Board::Whisper(whisper)),
        RequestStatus::Accepted
    );
    assert_eq!(
        ask(&mut net, ann, Board::Say("hello all".into())),
        RequestStatus::Accepted
    );

    let texts = |heard: &Heard| {
        heard
            .lines
            .iter()
            .map(|l| l.text.clone())
            .collect::<Vec<_>>()
    };
    let bob_heard = heard(&mut net, bob);
    assert_eq!(texts(&bob_heard), ["psst, bob", "hello all"]);
    assert_eq!(
        texts(&heard(&mut net, cat)),
        ["hello all"],
        "the whisper never reached cat"
    );
    let line = &bob_heard.lines[0];
    assert_eq!(
        line.from,
        net.client(ann).client_id().unwrap(),
        "the server stamped the sender"
    );
    assert!(line.private);
}

#[test]
fn rejected_request_changes_nothing_is_not_broadcast_and_tells_only_the_sender() {
    let mut net = board(ManagerRules::default());
    let (ann, bob) = (net.join(named("ann")), net.join(named("bob")));
    assert_eq!(
        ask(&mut net, ann, Board::Claim(1u8)),
        RequestStatus::Accepted
    );
    let verdict = ask(&mut net, bob, Board::Claim(1u8));
    assert_eq!(verdict, RequestStatus::Rejected("seat 1 is taken".into()));

    // One seats update each (ann's claim), none for bob's rejected claim.
    let ann_id = net.client(ann).client_id().unwrap();
    for player in [ann, bob] {
        let heard = heard(&mut net, player);
        assert_eq!(heard.seats.len(), 1);
        assert_eq!(heard.seats[0].0.get(&1), Some(&ann_id));
    }
    let stats = net.stats();
    assert_eq!((stats.rejected_total, stats.accepted_total), (1, 1));
}

#[test]
fn reconnect_after_a_network_cut_keeps_the_id_and_the_session() {
    let mut net = board(ManagerRules::default());
    let (ann, bob) = (net.join(named("ann")), net.join(named("bob")));
    assert_eq!(
        ask(&mut net, ann, Board::Claim(3u8)),
        RequestStatus::Accepted
    );
    let id = net.client(ann).client_id().unwrap();
    heard(&mut net, ann);
    heard(&mut net, bob);

    net.cut(ann);
    let cut = heard(&mut net, ann);
    assert!(
        matches!(cut.lost[..], [DisconnectReason::ConnectionLost(_)]),
        "{cut:?}"
    );
    assert_eq!(net.client(ann).client_id(), Some(id));
    // The first retry waits between 25 and 50 ms (50 ms, jittered).
    net.advance(Duration::from_millis(50));
    let back = heard(&mut net, ann);
    assert_eq!(
        back.welcomed,
        [Welcomed {
            client: id,
            resumed: true
        }]
    );
    // The resumed client got a snapshot with its seat still its own.
    assert_eq!(back.snapshots.len(), 1);
    assert_eq!(back.snapshots[0].seats.0.get(&3), Some(&id));
    // The others saw it go away and come back.
    let statuses: Vec<String> = heard(&mut net, bob)
        .presence
        .iter()
        .filter(|p| p.client == id)
        .map(|p| p.status.clone())
        .collect();
    assert_eq!(statuses, ["away", "back"]);
    // And the resumed session still acts as ann.
    assert_eq!(ask(&mut net, ann, Board::Release), RequestStatus::Accepted);
    let stats = net.stats();
    assert_eq!((stats.joins_total, stats.resumes_total), (2, 1));
}

#[test]
fn session_outlives_a_cut_only_for_its_grace_period() {
    let mut config = ManagerRules::default();
    config.sessions.grace_period = Duration::from_secs(30);
    let mut net = board(config);
    let (ann, bob) = (net.join(named("ann")), net.join(named("bob")));
    assert_eq!(
        ask(&mut net, ann, Board::Claim(2u8)),
        RequestStatus::Accepted
    );
    net.set_reachable(ann, false);
    net.cut(ann);
    net.advance(Duration::from_secs(29));
    assert_eq!(net.stats().sessions, 2, "held within the grace period");
    net.advance(Duration::from_secs(2));
    assert_eq!(net.stats().sessions, 1, "gone after it");
    let left: Vec<String> = heard(&mut net, bob)
        .presence
        .iter()
        .map(|p| p.status.clone())
        .filter(|s| s != "joined")
        .collect();
    assert_eq!(left, ["away", "left"]);
    // Coming back now is a refusal: the session is unknown.
    net.set_reachable(ann, true);
    net.advance(Duration::from_secs(10));
    let refused = heard(&mut net, ann).refused;
    assert_eq!(refused.len(), 1);
    assert_eq!(
        (refused[0].code, refused[0].reason.as_str()),
        (1, "unknown session")
    );
    assert!(net.client(ann).is_finished());
}

#[test]
fn client_gives_up_after_its_reconnect_attempts() {
    let mut net = board(ManagerRules::default());
    let config = ClientConfig {
        reconnect: ReconnectPolicy {
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            max_attempts: 4,
            ..Default::default()
        },
        ..ClientConfig::named("ann")
    };
    let ann = net.join(config);
    heard(&mut net, ann);
    net.set_reachable(ann, false);
    net.cut(ann);
    net.advance(Duration::from_secs(10));
    let events = net.events(ann);
    let attempts: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Reconnecting(n) => Some(*n),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, [1, 2, 3, 4]);
    assert!(matches!(
        events.last(),
        Some(ClientEvent::Disconnected(DisconnectReason::ConnectFailed(
            _
        )))
    ));
    assert!(net.client(ann).is_finished());
}

#[test]
fn leaving_ends_the_session_at_once_and_others_are_told() {
    let mut net = board(ManagerRules::default());
    let (ann, bob) = (net.join(named("ann")), net.join(named("bob")));
    assert_eq!(
        ask(&mut net, ann, Board::Claim(0u8)),
        RequestStatus::Accepted
    );
    heard(&mut net, bob);
    let id = net.client(ann).client_id().unwrap();
    net.close(ann, "quitting");
    assert!(
        net.client(ann).is_finished(),
        "no reconnect after a deliberate close"
    );
    let bob_heard = heard(&mut net, bob);
    assert!(bob_heard
        .presence
        .iter()
        .any(|p| p.client == id && p.status == "left"));
    assert!(bob_heard.seats.last().is_some_and(|s| s.0.is_empty()));
    let stats = net.stats();
    assert_eq!(stats.sessions, 1);
    assert!(stats.clients.iter().all(|c| c.id != id));
}

#[test]
fn request_without_answer_fails_with_a_timeout() {
    let mut net = board(ManagerRules::default());
    let ann = net.join(ClientConfig {
        request_timeout: Duration::from_millis(300),
        ..named("ann")
    });
    heard(&mut net, ann);
    net.stall(ann, true);
    let id = net.request(ann, Board::Say("anyone?".into())).unwrap();
    net.advance(Duration::from_millis(299));
    assert!(heard(&mut net, ann).verdicts.is_empty());
    net.advance(Duration::from_millis(1));
    let verdicts = heard(&mut net, ann).verdicts;
    assert_eq!(
        verdicts,
        [(id, RequestStatus::Failed(RequestError::Timeout))]
    );
    // The late answer, once the link moves again, changes nothing.
    net.stall(ann, false);
    assert!(heard(&mut net, ann).verdicts.is_empty());
}

#[test]
fn a_cut_keeps_open_requests_for_the_resume_and_sends_nothing_while_disconnected() {
    let mut net = board(ManagerRules::default());
    let (ann, bob) = (net.join(named("ann")), net.join(named("bob")));
    heard(&mut net, ann);
    heard(&mut net, bob);
    net.stall(ann, true);
    let open = net.request(ann, Board::Say("in flight".into())).unwrap();
    net.set_reachable(ann, false);
    net.cut(ann);
    // Lost with the link, and kept: no verdict yet.
    assert!(heard(&mut net, ann).verdicts.is_empty());
    let later = net.request(ann, Board::Say("anyone?".into())).unwrap();
    net.advance(Duration::from_millis(500));
    assert!(
        heard(&mut net, bob).lines.is_empty(),
        "nothing goes out while disconnected"
    );
    net.stall(ann, false);
    net.set_reachable(ann, true);
    net.advance(Duration::from_secs(6));
    assert!(net.client(ann).is_welcomed());
    let verdicts = heard(&mut net, ann).verdicts;
    assert_eq!(
        verdicts,
        [
            (open, RequestStatus::Accepted),
            (later, RequestStatus::Accepted)
        ]
    );
    let lines: Vec<String> = heard(&mut net, bob)
        .lines
        .into_iter()
        .map(|l| l.text)
        .collect();
    assert_eq!(lines, ["in flight", "anyone?"]);
}

#[test]
fn operator_kick_ends_the_session_the_others_are_told_and_the_client_does_not_come_back() {
    let mut net = board(ManagerRules::default());
    let ann = net.join(named("ann"));
    let bob = net.join(named("bob"));
    heard(&mut net, ann);
    let bob_id = net.client(bob).client_id().unwrap();
    assert!(net.kick(bob_id, "be nice"));
    // bob is told why and stays away (no reconnect), however long we wait.
    let gone = heard(&mut net, bob);
    assert_eq!(
        gone.disconnected,
        [DisconnectReason::ClosedByPeer {
            code: CloseCode::KICKED,
            reason: "be nice".into()
        }]
    );
    net.advance(Duration::from_secs(5));
    assert!(!net.client(bob).is_welcomed());
    let stats = net.stats();
    assert_eq!(stats.sessions, 1);
    assert!(
        stats.clients.iter().all(|c| c.id != bob_id),
        "{:?}",
        stats.clients
    );
    // ann hears that bob left, at once (not after a grace period).
    let heard_by_ann = heard(&mut net, ann);
    assert!(
        heard_by_ann
            .presence
            .iter()
            .any(|p| p.client == bob_id && p.status == "left"),
        "{:?}",
        heard_by_ann.presence
    );
    // Kicking someone not there does nothing.
    assert!(!net.kick(bob_id, "again"));
    assert!(net
        .log()
        .iter()
        .any(|l| l.text.contains("kicked by the operator: be nice")));
}

#[path = "manager/abuse.rs"]
mod abuse;
#[path = "manager/resend.rs"]
mod resend;
