//! The manager's rules in memory (the harness: client cores and a manager
//! core, no socket, a clock the test moves): sessions, reconnects, validated
//! requests, addressed updates, refusals, abuse, rate limits, timeouts.
//! What is about sockets (a real cut, shutdown flushing, a silent server) is
//! in `manager_loopback.rs`.
//!
//! Longer than 500 lines on purpose: every rule of the manager in one place, one test per
//! scenario sharing the helpers at the top; split, they would repeat them.

use std::time::{Duration, Instant};

use bytes::Bytes;
use switchboard::harness::{Harness, Player};
use switchboard::manager::protocol::{
    self, ErrorCode, ErrorReply, Hello, Refused, RequestFrame, Resume, Welcome,
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
    let hello = Hello {
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
fn forged_and_reused_tokens_are_refused_and_change_nothing() {
    let mut net = board(ManagerRules::default());
    let first = net.open_raw();
    net.send_raw(first, hello(None));
    let replies = session_replies(&mut net, first);
    assert_eq!(replies[0].0, protocol::WELCOME);
    let welcome: Welcome = replies[0].1.content().unwrap();

    // A forged token for a real id.
    let forger = net.open_raw();
    let forged = Resume {
        client: welcome.client,
        token: ReconnectToken([7; 32]),
    };
    net.send_raw(forger, hello(Some(forged)));
    let replies = session_replies(&mut net, forger);
    assert_eq!(replies[0].0, protocol::REFUSED);
    assert_eq!(
        replies[0].1.content::<Refused>().unwrap().reason,
        "invalid reconnect token"
    );
    assert!(matches!(
        net.raw_closed(forger),
        Some(DisconnectReason::ClosedByPeer {
            code: CloseCode::REFUSED,
            ..
        })
    ));

    // The real token works once: it replaces the first connection...
    let second = net.open_raw();
    let real = Resume {
        client: welcome.client,
        token: welcome.token.clone(),
    };
    net.send_raw(second, hello(Some(real.clone())));
    let replies = session_replies(&mut net, second);
    assert_eq!(replies[0].0, protocol::WELCOME);
    let again: Welcome = replies[0].1.content().unwrap();
    assert_eq!(again.client, welcome.client);
    assert!(again.resumed);
    assert!(matches!(
        net.raw_closed(first),
        Some(DisconnectReason::ClosedByPeer {
            code: CloseCode::REPLACED,
            ..
        })
    ));
    // ... and never again.
    let replay = net.open_raw();
    net.send_raw(replay, hello(Some(real)));
    let replies = session_replies(&mut net, replay);
    assert_eq!(replies[0].0, protocol::REFUSED);
    assert_eq!(replies[0].1.content::<Refused>().unwrap().code, 2);
    // The refusals changed nothing: the live session still works.
    let frame = RequestFrame {
        id: 9,
        channel: 16,
        action: 1,
        content: switchboard::codec::encode_value("still me").unwrap(),
    };
    net.send_raw(second, protocol::session_message(protocol::REQUEST, &frame));
    let replies = session_replies(&mut net, second);
    assert_eq!(replies[0].0, protocol::ACCEPTED);
    assert_eq!(replies[0].1.content::<u64>().unwrap(), 9);
    let stats = net.stats();
    assert_eq!((stats.refused_total, stats.sessions), (2, 1));
}

#[test]
fn bad_messages_get_typed_errors_and_repeated_abuse_disconnects() {
    let mut net = board(ManagerRules {
        max_strikes: 5,
        ..ManagerRules::default()
    });
    let raw = net.open_raw();
    let error_code = |replies: Vec<(u16, Message)>| {
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0].0, protocol::ERROR);
        replies[0].1.content::<ErrorReply>().unwrap().code
    };

    // Before the welcome.
    net.send_raw(raw, Message::from_raw(16, 1, Bytes::from_static(b"\x02hi")));
    assert_eq!(
        error_code(session_replies(&mut net, raw)),
        ErrorCode::NotWelcomed
    );

    net.send_raw(raw, hello(None));
    assert_eq!(session_replies(&mut net, raw)[0].0, protocol::WELCOME);
    let cases: [(u16, u16, &[u8], ErrorCode); 3] = [
        (99, 1, b"\x00", ErrorCode::UnknownChannel),
        (16, 77, b"\x00", ErrorCode::UnknownAction),
        (16, 3, b"\xff\xff", ErrorCode::BadContent),
    ];
    for (channel, action, content, expected) in cases {
        net.send_raw(
            raw,
            Message::from_raw(channel, action, Bytes::copy_from_slice(content)),
        );
        assert_eq!(error_code(session_replies(&mut net, raw)), expected);
    }
    // Four strikes so far; the fifth is allowed, the sixth passes the limit.
    net.send_raw(raw, Message::from_raw(99, 1, Bytes::new()));
    assert!(net.raw_closed(raw).is_none());
    net.send_raw(raw, Message::from_raw(99, 1, Bytes::new()));
    assert!(matches!(
        net.raw_closed(raw),
        Some(DisconnectReason::ClosedByPeer {
            code: CloseCode::ABUSE,
            ..
        })
    ));
}

#[test]
fn message_flood_is_rate_limited_with_an_answer_for_each_drop() {
    let mut net = board(ManagerRules {
        message_rate: RateLimit {
            per_second: 1.0,
            burst: 10.0,
        },
        max_strikes: 1000,
        ..ManagerRules::default()
    });
    let raw = net.open_raw();
    net.send_raw(raw, hello(None)); // spends one of the ten
    assert_eq!(session_replies(&mut net, raw)[0].0, protocol::WELCOME);
    for i in 0..30u64 {
        let frame = RequestFrame {
            id: i + 1,
            channel: 16,
            action: 1,
            content: switchboard::codec::encode_value("spam").unwrap(),
        };
        net.send_raw(raw, protocol::session_message(protocol::REQUEST, &frame));
    }
    let (mut accepted, mut limited) = (0, 0);
    for (action, m) in session_replies(&mut net, raw) {
        match action {
            protocol::ACCEPTED => accepted += 1,
            protocol::ERROR => {
                assert_eq!(
                    m.content::<ErrorReply>().unwrap().code,
                    ErrorCode::RateLimited
                );
                limited += 1;
            }
            other => panic!("unexpected session action {other}"),
        }
    }
    assert_eq!(
        (accepted, limited),
        (9, 21),
        "burst of ten, hello included; every drop answered"
    );
    assert_eq!(net.stats().rate_limited_total, 21);
    // The bucket refills with time: one more a second.
    net.advance(Duration::from_secs(3));
    let frame = RequestFrame {
        id: 99,
        channel: 16,
        action: 1,
        content: switchboard::codec::encode_value("later").unwrap(),
    };
    net.send_raw(raw, protocol::session_message(protocol::REQUEST, &frame));
    assert_eq!(session_replies(&mut net, raw)[0].0, protocol::ACCEPTED);
}

#[test]
fn connection_without_hello_is_closed_after_the_hello_timeout() {
    let mut net = board(ManagerRules {
        hello_timeout: Duration::from_millis(300),
        ..ManagerRules::default()
    });
    let raw = net.open_raw();
    net.advance(Duration::from_millis(250));
    assert!(net.raw_closed(raw).is_none(), "not before the timeout");
    net.advance(Duration::from_millis(300));
    assert!(matches!(
        net.raw_closed(raw),
        Some(DisconnectReason::ClosedByPeer {
            code: CloseCode::IDLE_TIMEOUT,
            ..
        })
    ));
}

#[test]
fn wrong_password_is_refused_before_an_id_is_given() {
    let mut net = board(ManagerRules {
        password: Some("sesame".into()),
        ..ManagerRules::default()
    });
    let eve = net.join(named("eve"));
    let refused = heard(&mut net, eve).refused;
    assert_eq!(
        (refused[0].code, refused[0].reason.as_str()),
        (5, "wrong password")
    );
    assert_eq!(net.client(eve).client_id(), None);
    assert!(net.client(eve).is_finished());

    // Same address: it waits a second after a wrong password.
    net.advance(Duration::from_secs(1));
    let friend = net.join(ClientConfig {
        password: Some("sesame".into()),
        ..ClientConfig::named("friend")
    });
    assert!(net.client(friend).is_welcomed());
    let stats = net.stats();
    assert_eq!(
        (stats.refused_total, stats.joins_total, stats.sessions),
        (1, 1, 1)
    );
    assert_eq!(stats.clients.len(), 1);
    assert_eq!(stats.clients[0].name, "friend");
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
fn a_cut_fails_open_requests_and_no_request_goes_out_while_disconnected() {
    let mut net = board(ManagerRules::default());
    let ann = net.join(named("ann"));
    heard(&mut net, ann);
    net.stall(ann, true);
    let open = net.request(ann, Board::Say("in flight".into())).unwrap();
    net.set_reachable(ann, false);
    net.cut(ann);
    let verdicts = heard(&mut net, ann).verdicts;
    assert_eq!(
        verdicts,
        [(open, RequestStatus::Failed(RequestError::ConnectionLost))]
    );
    assert_eq!(
        net.request(ann, Board::Say("anyone?".into())),
        Err(RequestError::NotConnected)
    );
    net.stall(ann, false);
    net.set_reachable(ann, true);
    net.advance(Duration::from_secs(1));
    assert!(net.client(ann).is_welcomed());
}

fn from(last: u8) -> std::net::IpAddr {
    std::net::IpAddr::from([127, 0, 0, last])
}

#[test]
fn session_exhaustion_by_hello_and_hang_up_cannot_lock_players_out() {
    let mut config = ManagerRules::default();
    config.sessions.max_sessions = 64;
    let mut net = board(config);
    // The attack: 64 clients from many addresses say hello and hang up
    // without a goodbye; their sessions wait out the grace period.
    let mut ghosts = Vec::new();
    for i in 0..64u8 {
        let ghost = net.join_from(from(10 + i % 32), ClientConfig::named("ghost"));
        net.set_reachable(ghost, false);
        net.cut(ghost);
        ghosts.push(ghost);
    }
    assert_eq!(net.stats().sessions, 64);
    // A real player is welcomed: the ghost offline the longest gives way,
    // and the game hears it leave.
    let ann = net.join_from(from(2), named("ann"));
    assert!(net.client(ann).is_welcomed());
    let stats = net.stats();
    assert_eq!((stats.sessions, stats.evicted_total), (64, 1));
    // Every later player too.
    for _ in 0..10 {
        let player = net.join_from(from(3), ClientConfig::named("bob"));
        assert!(net.client(player).is_welcomed());
    }
    assert_eq!(net.stats().evicted_total, 11);
}

#[test]
fn session_exhaustion_from_one_address_is_capped_per_address() {
    let mut config = ManagerRules::default();
    config.sessions.max_sessions_per_ip = 4;
    let mut net = board(config);
    let held: Vec<Player> = (0..4)
        .map(|_| net.join_from(from(2), ClientConfig::named("eve")))
        .collect();
    assert!(held.iter().all(|p| net.client(*p).is_welcomed()));
    let fifth = net.join_from(from(2), ClientConfig::named("eve"));
    let refused = heard(&mut net, fifth).refused;
    assert_eq!(
        (refused[0].code, refused[0].reason.as_str()),
        (8, "too many sessions from your address")
    );
    // Another address is always welcome.
    let ann = net.join_from(from(3), named("ann"));
    assert!(net.client(ann).is_welcomed());
    // The address's own offline session gives way to its next client.
    net.set_reachable(held[0], false);
    net.cut(held[0]);
    let sixth = net.join_from(from(2), ClientConfig::named("eve"));
    assert!(net.client(sixth).is_welcomed());
    assert_eq!(net.stats().evicted_total, 1);
}

#[test]
fn password_guessing_from_one_address_waits_longer_after_each_failure() {
    let mut net = board(ManagerRules {
        password: Some("sesame".into()),
        ..ManagerRules::default()
    });
    let guess = |password: &str| ClientConfig {
        password: Some(password.into()),
        ..ClientConfig::named("eve")
    };
    let code =
        |net: &mut Harness<BoardLogic>, player| heard(net, player).refused.first().map(|r| r.code);
    let first = net.join_from(from(2), guess("open"));
    assert_eq!(code(&mut net, first), Some(5), "wrong password");
    // At once again, even with the right password: not checked, wait 1 s.
    let second = net.join_from(from(2), guess("sesame"));
    let refused = heard(&mut net, second).refused;
    assert_eq!(
        (refused[0].code, refused[0].reason.as_str()),
        (9, "too many wrong passwords; retry in 1 s")
    );
    net.advance(Duration::from_secs(1));
    let third = net.join_from(from(2), guess("sesam"));
    assert_eq!(code(&mut net, third), Some(5));
    // The wait doubled: 1 s is not enough now, 2 s is.
    net.advance(Duration::from_secs(1));
    let fourth = net.join_from(from(2), guess("sesame"));
    assert_eq!(code(&mut net, fourth), Some(9));
    net.advance(Duration::from_secs(1));
    let fifth = net.join_from(from(2), guess("sesame"));
    assert!(net.client(fifth).is_welcomed());
    // Another address was never slowed down.
    let ann = net.join_from(from(3), guess("sesame"));
    assert!(net.client(ann).is_welcomed());
}

#[test]
fn player_names_are_trimmed_once_and_the_game_sees_the_trimmed_name() {
    let mut net = board(ManagerRules::default());
    let ann = net.join(named("  ann  "));
    assert!(net.client(ann).is_welcomed());
    assert_eq!(net.stats().clients[0].name, "ann");
    let bob = net.join(named("bob"));
    let joined: Vec<String> = heard(&mut net, bob)
        .snapshots
        .iter()
        .flat_map(|s| s.players.values().cloned())
        .collect();
    assert!(joined.contains(&"ann".to_string()), "{joined:?}");
    let eve = net.join(named("e\u{1b}[2Jve"));
    let refused = heard(&mut net, eve).refused;
    assert_eq!(refused[0].code, 7, "control characters are refused");
}

#[test]
fn log_flood_by_join_and_leave_from_one_address_is_capped_and_others_are_still_logged() {
    let mut net = board(ManagerRules::default());
    let rate = ManagerRules::default().peer_log_rate;
    assert_eq!((rate.per_second, rate.burst), (1.0, 20.0));
    // The attack: 100 joins and leaves from one address, two lines each.
    for _ in 0..100 {
        let eve = net.join_from(from(2), ClientConfig::named("eve"));
        assert!(net.client(eve).is_welcomed());
        net.close(eve, "bye");
    }
    // Its address had 20 lines; the rest were skipped and counted.
    assert_eq!(net.log().len(), 20);
    assert_eq!(net.stats().logs_skipped_total, 180);
    // A player from another address is logged, with what was skipped.
    let ann = net.join_from(from(3), named("ann"));
    assert!(net.client(ann).is_welcomed());
    let last = &net.log().last().unwrap().text;
    assert!(
        last.contains("joined as \"ann\"") && last.contains("(180 lines about peers skipped"),
        "{last}"
    );
    // The flooding address gets a line a second back.
    net.advance(Duration::from_secs(3));
    for _ in 0..5 {
        let eve = net.join_from(from(2), ClientConfig::named("eve"));
        net.close(eve, "bye");
    }
    assert_eq!(net.log().len(), 21 + 3);
    assert_eq!(net.stats().logs_skipped_total, 180 + 7);
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
