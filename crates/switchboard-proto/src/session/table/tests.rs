//! The session table's rules, in memory.

use super::*;

const SECOND: Duration = Duration::from_secs(1);
const HOME: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

fn table() -> Sessions {
    Sessions::new(
        SessionConfig {
            grace_period: Duration::from_secs(60),
            max_sessions: 2,
            max_sessions_per_address: 32,
        },
        Box::new(crate::entropy::Seeded::new(1)),
    )
}

#[test]
fn reconnect_within_grace_keeps_the_id_and_rotates_the_token() {
    let t0 = Instant::now();
    let mut sessions = table();
    let first = sessions.admit_new(PeerId(1), "ann", HOME, t0).unwrap();
    assert_eq!(
        sessions.connection_lost(PeerId(1), t0 + SECOND),
        Some(first.client)
    );
    let again = sessions
        .resume(PeerId(2), first.client, &first.token, t0 + 30 * SECOND)
        .unwrap();
    assert_eq!(again.client, first.client);
    assert!(again.resumed);
    assert!(!again.token.matches(&first.token), "token rotated");
    assert_eq!(sessions.client_of(PeerId(2)), Some(first.client));
    assert_eq!(sessions.get(first.client).unwrap().reconnects, 1);
}

#[test]
fn reused_token_is_refused_and_changes_nothing() {
    let t0 = Instant::now();
    let mut sessions = table();
    let first = sessions.admit_new(PeerId(1), "ann", HOME, t0).unwrap();
    sessions.connection_lost(PeerId(1), t0);
    let second = sessions
        .resume(PeerId(2), first.client, &first.token, t0)
        .unwrap();
    sessions.connection_lost(PeerId(2), t0);
    assert_eq!(
        sessions.resume(PeerId(3), first.client, &first.token, t0),
        Err(Refusal::BadToken)
    );
    assert_eq!(sessions.client_of(PeerId(3)), None);
    // The current token still works afterwards.
    assert!(sessions
        .resume(PeerId(4), first.client, &second.token, t0)
        .is_ok());
}

#[test]
fn forged_token_and_unknown_id_are_refused() {
    let t0 = Instant::now();
    let mut sessions = table();
    let first = sessions.admit_new(PeerId(1), "ann", HOME, t0).unwrap();
    let forged = ReconnectToken([0; 32]);
    assert_eq!(
        sessions.resume(PeerId(2), first.client, &forged, t0),
        Err(Refusal::BadToken)
    );
    assert_eq!(
        sessions.resume(PeerId(2), ClientId::from_u128(99), &first.token, t0),
        Err(Refusal::UnknownSession)
    );
    assert_eq!(
        sessions.get(first.client).unwrap().peer(),
        Some(PeerId(1)),
        "untouched"
    );
}

#[test]
fn expired_session_is_refused_then_removed() {
    let t0 = Instant::now();
    let mut sessions = table();
    let first = sessions.admit_new(PeerId(1), "ann", HOME, t0).unwrap();
    sessions.connection_lost(PeerId(1), t0);
    let late = t0 + 61 * SECOND;
    assert_eq!(
        sessions.resume(PeerId(2), first.client, &first.token, late),
        Err(Refusal::Expired)
    );
    let expired = sessions.expire(late);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].id, first.client);
    assert!(sessions.is_empty());
    assert!(sessions.expire(late + 100 * SECOND).is_empty());
}

#[test]
fn online_sessions_never_expire() {
    let t0 = Instant::now();
    let mut sessions = table();
    sessions.admit_new(PeerId(1), "ann", HOME, t0).unwrap();
    assert!(sessions.expire(t0 + 3600 * SECOND).is_empty());
}

#[test]
fn resume_over_a_half_open_connection_replaces_it() {
    let t0 = Instant::now();
    let mut sessions = table();
    let first = sessions.admit_new(PeerId(1), "ann", HOME, t0).unwrap();
    let again = sessions
        .resume(PeerId(2), first.client, &first.token, t0)
        .unwrap();
    assert_eq!(again.replaced, Some(PeerId(1)));
    // The old connection's end no longer touches the session.
    assert_eq!(sessions.connection_lost(PeerId(1), t0), None);
    assert_eq!(sessions.get(first.client).unwrap().peer(), Some(PeerId(2)));
}

#[test]
fn table_full_refuses_new_clients_but_not_reconnects() {
    let t0 = Instant::now();
    let mut sessions = table();
    let a = sessions.admit_new(PeerId(1), "a", HOME, t0).unwrap();
    sessions.admit_new(PeerId(2), "b", HOME, t0).unwrap();
    assert_eq!(
        sessions.admit_new(PeerId(3), "c", HOME, t0),
        Err(Refusal::Full)
    );
    sessions.connection_lost(PeerId(1), t0);
    assert!(sessions.resume(PeerId(4), a.client, &a.token, t0).is_ok());
}

#[test]
fn leave_ends_the_session_at_once() {
    let t0 = Instant::now();
    let mut sessions = table();
    let a = sessions.admit_new(PeerId(1), "a", HOME, t0).unwrap();
    assert_eq!(sessions.leave(PeerId(1)).unwrap().id, a.client);
    assert_eq!(
        sessions.resume(PeerId(2), a.client, &a.token, t0),
        Err(Refusal::UnknownSession)
    );
}

#[test]
fn a_full_table_makes_the_session_offline_longest_give_way() {
    let t0 = Instant::now();
    let mut sessions = table();
    let a = sessions.admit_new(PeerId(1), "a", HOME, t0).unwrap();
    let b = sessions.admit_new(PeerId(2), "b", HOME, t0).unwrap();
    sessions.connection_lost(PeerId(2), t0);
    sessions.connection_lost(PeerId(1), t0 + SECOND);
    let c = sessions
        .admit_new(PeerId(3), "c", HOME, t0 + 2 * SECOND)
        .unwrap();
    assert_eq!(c.evicted, Some(b.client), "b was offline the longest");
    assert_eq!(sessions.len(), 2);
    assert_eq!(
        sessions.resume(PeerId(4), b.client, &b.token, t0 + 3 * SECOND),
        Err(Refusal::UnknownSession)
    );
    assert!(sessions
        .resume(PeerId(5), a.client, &a.token, t0 + 3 * SECOND)
        .is_ok());
}

#[test]
fn players_behind_one_address_all_get_sessions_while_the_table_is_not_crowded() {
    let t0 = Instant::now();
    let mut sessions = Sessions::new(
        SessionConfig::default(),
        Box::new(crate::entropy::Seeded::new(3)),
    );
    let school = IpAddr::from([203, 0, 113, 9]);
    for i in 0..100u64 {
        assert!(
            sessions.admit_new(PeerId(i), "pupil", school, t0).is_ok(),
            "pupil {i}"
        );
    }
}

#[test]
fn an_address_over_its_share_evicts_its_own_offline_session_or_is_refused() {
    let t0 = Instant::now();
    let mut sessions = Sessions::new(
        SessionConfig {
            grace_period: Duration::from_secs(60),
            // Three sessions make the table crowded (half of six): the
            // per-address share holds from then on.
            max_sessions: 6,
            max_sessions_per_address: 2,
        },
        Box::new(crate::entropy::Seeded::new(2)),
    );
    let (x, y) = (IpAddr::from([127, 0, 0, 2]), IpAddr::from([127, 0, 0, 3]));
    let other = sessions.admit_new(PeerId(9), "y", y, t0).unwrap();
    sessions.connection_lost(PeerId(9), t0);
    sessions.admit_new(PeerId(1), "x1", x, t0).unwrap();
    let x2 = sessions.admit_new(PeerId(2), "x2", x, t0).unwrap();
    assert_eq!(
        sessions.admit_new(PeerId(3), "x3", x, t0).err(),
        Some(Refusal::TooManyFromAddress),
        "both online: refused, and another address's offline session is not taken"
    );
    sessions.connection_lost(PeerId(2), t0);
    let x3 = sessions.admit_new(PeerId(3), "x3", x, t0).unwrap();
    assert_eq!(x3.evicted, Some(x2.client));
    assert!(sessions.get(other.client).is_some());
    assert_eq!(Refusal::TooManyFromAddress.code(), 8);
}

#[test]
fn settings_written_with_the_old_per_ip_name_are_read_as_per_address() {
    let mut old = serde_json::to_value(SessionConfig::default()).unwrap();
    let fields = old.as_object_mut().unwrap();
    fields.remove("max_sessions_per_address");
    fields.insert("max_sessions_per_ip".into(), 5.into());
    let read: SessionConfig = serde_json::from_value(old).unwrap();
    assert_eq!(read.max_sessions_per_address, 5);
}
