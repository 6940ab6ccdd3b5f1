//! What a peer may not do to the manager: forged tokens, bad messages,
//! floods, silent connections, password guessing, exhausting the sessions,
//! names with control characters, flooding the log. Named after the attack.

use super::*;

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
    // Crowded (half of 8 held) once the four are in: the per-address share
    // holds from then on (below half, players behind one address all get in).
    config.sessions.max_sessions = 8;
    config.sessions.max_sessions_per_address = 4;
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
