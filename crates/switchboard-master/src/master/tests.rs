//! Unit tests of the master: challenges, goodbyes, expiry, limits, pages.

use super::*;
use crate::protocol::{Filter, ListingError};
use crate::registry::MemoryRegistry;

fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], port))
}

fn info(name: &str) -> ServerInfo {
    ServerInfo {
        name: name.into(),
        max_players: 8,
        ..ServerInfo::default()
    }
}

fn challenge_of(reply: Option<(SocketAddr, Vec<u8>)>) -> (SocketAddr, u64) {
    let (to, bytes) = reply.expect("an info query");
    match protocol::decode(&bytes).unwrap() {
        Datagram::InfoQuery { challenge, .. } => (to, challenge),
        other => panic!("{other:?}"),
    }
}

/// Heartbeat, query, answer; false when the master sent no query.
async fn register(
    master: &mut Master<MemoryRegistry>,
    from: SocketAddr,
    name: &str,
    now: Instant,
) -> bool {
    let Some(query) = master.on_datagram(from, &protocol::heartbeat(), now).await else {
        return false;
    };
    let (to, challenge) = challenge_of(Some(query));
    assert_eq!(to, from, "queries go to the heartbeat's source");
    let reply = protocol::encode(&Datagram::InfoReply {
        challenge,
        info: info(name),
    });
    master.on_datagram(from, &reply, now).await;
    true
}

async fn all(master: &mut Master<MemoryRegistry>) -> Vec<String> {
    let request = ListRequest {
        filter: Filter::default(),
        page: 0,
        page_size: 100,
    };
    master
        .list(&request)
        .await
        .unwrap()
        .servers
        .into_iter()
        .map(|l| l.info.name)
        .collect()
}

#[tokio::test]
async fn a_goodbye_with_the_last_challenge_delists_at_once_and_a_forged_one_changes_nothing() {
    let t0 = Instant::now();
    let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
    let a = addr(1, 7000);
    let (_, challenge) = challenge_of(master.on_datagram(a, &protocol::heartbeat(), t0).await);
    let reply = protocol::encode(&Datagram::InfoReply {
        challenge,
        info: info("a"),
    });
    master.on_datagram(a, &reply, t0).await;
    assert_eq!(all(&mut master).await, ["a"]);
    // Forged: another challenge, or the right one from another address.
    let forged = protocol::encode(&Datagram::Goodbye {
        challenge: challenge ^ 1,
    });
    master.on_datagram(a, &forged, t0).await;
    let right = protocol::encode(&Datagram::Goodbye { challenge });
    master.on_datagram(addr(2, 7000), &right, t0).await;
    assert_eq!(
        all(&mut master).await,
        ["a"],
        "forged goodbyes change nothing"
    );
    // The server's own: off the list at once, not at its expiry.
    master.on_datagram(a, &right, t0).await;
    assert!(all(&mut master).await.is_empty());
    assert_eq!(master.stats().goodbyes, 1);
    // Replayed, it does nothing more.
    master.on_datagram(a, &right, t0).await;
    assert_eq!(master.stats().goodbyes, 1);
}

#[tokio::test]
async fn listed_only_after_answering_the_challenge_then_expires() {
    let t0 = Instant::now();
    let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
    let a = addr(1, 7000);
    let (_, challenge) = challenge_of(master.on_datagram(a, &protocol::heartbeat(), t0).await);
    assert!(
        all(&mut master).await.is_empty(),
        "not listed before it answers"
    );
    // A reply with the wrong challenge, or from elsewhere, lists nothing.
    let wrong = protocol::encode(&Datagram::InfoReply {
        challenge: challenge ^ 1,
        info: info("a"),
    });
    master.on_datagram(a, &wrong, t0).await;
    let elsewhere = protocol::encode(&Datagram::InfoReply {
        challenge,
        info: info("a"),
    });
    master.on_datagram(addr(2, 7000), &elsewhere, t0).await;
    assert!(all(&mut master).await.is_empty());
    assert_eq!(master.stats().unsolicited, 2);
    master.on_datagram(a, &elsewhere, t0).await;
    assert_eq!(all(&mut master).await, ["a"]);

    let expiry = MasterConfig::default().expiry;
    master.tick(t0 + expiry).await;
    assert_eq!(all(&mut master).await, ["a"], "still within the expiry");
    master.tick(t0 + expiry + Duration::from_secs(1)).await;
    assert!(
        all(&mut master).await.is_empty(),
        "silent past the expiry: dropped"
    );
    assert_eq!(master.stats().expired, 1);
}

#[tokio::test]
async fn heartbeat_flood_from_one_address_is_limited() {
    let t0 = Instant::now();
    let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
    let beat = protocol::heartbeat();
    let mut answered = 0;
    for _ in 0..1000 {
        answered += master.on_datagram(addr(9, 1), &beat, t0).await.is_some() as usize;
    }
    assert_eq!(answered, MasterConfig::default().heartbeat_burst as usize);
    assert_eq!(master.stats().rate_limited, 1000 - answered as u64);
    // Another address is not affected.
    assert!(master.on_datagram(addr(8, 1), &beat, t0).await.is_some());
}

#[tokio::test]
async fn servers_per_address_and_registry_size_are_bounded() {
    let t0 = Instant::now();
    let config = MasterConfig {
        max_servers_per_address: 2,
        max_servers: 3,
        ..MasterConfig::default()
    };
    let mut master = Master::new(config, MemoryRegistry::default());
    assert!(register(&mut master, addr(1, 1), "p1", t0).await);
    assert!(register(&mut master, addr(1, 2), "p2", t0).await);
    assert!(
        !register(&mut master, addr(1, 3), "p3", t0).await,
        "a third on the same IP"
    );
    assert_eq!(all(&mut master).await.len(), 2, "two per IP");
    assert!(register(&mut master, addr(2, 1), "b", t0).await);
    // Full: a newcomer takes the place of one of the IP holding two...
    assert!(register(&mut master, addr(3, 1), "c", t0).await);
    assert_eq!(all(&mut master).await.len(), 3, "three in all");
    // ...and once every IP holds one, the next is refused.
    let listed = master.stats().registered;
    register(&mut master, addr(4, 1), "d", t0).await;
    assert_eq!(master.stats().registered, listed, "the registry is full");
    assert_eq!(all(&mut master).await.len(), 3, "three in all");
    assert!(master.stats().refused_per_address >= 1 && master.stats().refused_full >= 1);
}

#[tokio::test]
async fn garbage_is_counted_and_dropped() {
    let t0 = Instant::now();
    let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
    for junk in [&b""[..], b"hello", b"SWMS\x01\xff", &[0u8; 1200][..]] {
        assert!(master.on_datagram(addr(1, 1), junk, t0).await.is_none());
    }
    assert_eq!(master.stats().malformed, 4);
}

#[tokio::test]
async fn pages_and_filters() {
    let t0 = Instant::now();
    let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
    for i in 0..25u8 {
        assert!(register(&mut master, addr(i, 7000), &format!("s{i:02}"), t0).await);
    }
    let page = master
        .list(&ListRequest {
            filter: Filter::default(),
            page: 2,
            page_size: 10,
        })
        .await
        .unwrap();
    assert_eq!((page.total, page.servers.len()), (25, 5));
    let named = Filter {
        game_type: Some("none".into()),
        ..Filter::default()
    };
    assert_eq!(
        master
            .list(&ListRequest {
                filter: named,
                page: 0,
                page_size: 10
            })
            .await
            .unwrap()
            .total,
        0
    );
}

#[tokio::test]
async fn heartbeats_forged_from_a_servers_address_cannot_delist_it() {
    // The audit: 7 bytes a second forged from a server's address used up
    // its rate, and its own heartbeats then refreshed nothing.
    let t0 = Instant::now();
    let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
    let server = addr(1, 7000);
    assert!(register(&mut master, server, "victim", t0).await);
    let beat = protocol::heartbeat();
    let expiry = MasterConfig::default().expiry;
    // Forged heartbeats (from the server's own address) every 100 ms, and
    // the server's every 5 s, for three expiries.
    let mut at = t0;
    while at < t0 + 3 * expiry {
        at += Duration::from_millis(100);
        master.on_datagram(server, &beat, at).await;
        master.tick(at).await;
    }
    assert_eq!(all(&mut master).await, ["victim"], "still listed");
    assert!(master.stats().rate_limited > 100);
    assert_eq!(master.stats().expired, 0);
}

#[tokio::test]
async fn sixteen_servers_behind_one_address_at_five_second_heartbeats_all_stay_listed() {
    // The audit: one budget per IP kept 4 to 9 of 16 honest servers listed.
    let t0 = Instant::now();
    let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
    for port in 0..16 {
        assert!(register(&mut master, addr(7, 7000 + port), "box", t0).await);
    }
    let beat = protocol::heartbeat();
    let mut at = t0;
    for _ in 0..24 {
        at += Duration::from_secs(5);
        for port in 0..16 {
            let reply = master.on_datagram(addr(7, 7000 + port), &beat, at).await;
            // Each heartbeat is answered (its query refreshes the info).
            if let Some((to, bytes)) = reply {
                let Datagram::InfoQuery { challenge, .. } = protocol::decode(&bytes).unwrap()
                else {
                    panic!("a query");
                };
                let reply = protocol::encode(&Datagram::InfoReply {
                    challenge,
                    info: info("box"),
                });
                master.on_datagram(to, &reply, at).await;
            }
        }
        master.tick(at).await;
    }
    assert_eq!(all(&mut master).await.len(), 16);
    assert_eq!(master.stats().rate_limited, 0);
}

#[tokio::test]
async fn a_master_too_busy_to_read_heartbeats_expires_none_until_each_could_be_heard() {
    // The audit: a master stalled 15 s by list requests expired 1,832 of
    // 2,000 live servers when it came back.
    let t0 = Instant::now();
    let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
    for i in 0..20 {
        assert!(register(&mut master, addr(i, 7000), "live", t0).await);
    }
    let expiry = MasterConfig::default().expiry;
    // Back after 25 s during which its queue overflowed.
    let back = t0 + expiry + Duration::from_secs(5);
    master.missed_datagrams(1200, back);
    master.tick(back).await;
    assert_eq!(all(&mut master).await.len(), 20, "none expired");
    // Ten of them are heard again; the other ten are really gone.
    let heard = back + Duration::from_secs(5);
    for i in 0..10 {
        master
            .on_datagram(addr(i, 7000), &protocol::heartbeat(), heard)
            .await;
    }
    master.tick(back + expiry - Duration::from_secs(1)).await;
    assert_eq!(all(&mut master).await.len(), 20, "still within the window");
    master.tick(back + expiry + Duration::from_secs(1)).await;
    assert_eq!(all(&mut master).await.len(), 10, "the silent ones go");
    assert_eq!(master.stats().datagrams_missed, 1200);
}

#[test]
fn a_list_filter_of_two_thousand_tags_is_refused_before_any_server_is_matched() {
    // The audit: ~2,000 copies of one tag in a 4 KiB request cost 3.4
    // CPU-seconds against 10,000 servers.
    let filter = Filter {
        tags: vec![(String::new(), String::new()); 2000],
        ..Filter::default()
    };
    let err = filter.check().unwrap_err();
    assert_eq!(err, ListingError::FilterTooManyTags(2000));
    assert_eq!(err.to_string(), "a filter of 2000 tags (the limit is 16)");
    let long = Filter {
        region: Some("r".repeat(65)),
        ..Filter::default()
    };
    assert_eq!(long.check(), Err(ListingError::FilterTextTooLong(65)));
    let fine = Filter {
        tags: vec![("mode".into(), "coop".into()); 16],
        ..Filter::default()
    };
    assert!(fine.check().is_ok());
}

#[tokio::test]
async fn a_registry_filled_by_a_few_addresses_still_lists_a_newcomer() {
    // The audit: 313 addresses (32 servers each) kept the registry full,
    // and real servers were refused.
    let t0 = Instant::now();
    let config = MasterConfig {
        max_servers: 100,
        max_servers_per_address: 25,
        heartbeats_per_minute_per_address: 1e6,
        heartbeat_burst: 100.0,
        ..MasterConfig::default()
    };
    let mut master = Master::new(config, MemoryRegistry::default());
    for ip in 1..=4 {
        for port in 0..25 {
            assert!(register(&mut master, addr(ip, 7000 + port), "hoard", t0).await);
        }
    }
    assert_eq!(all_pages(&mut master).await.len(), 100);
    for port in 0..3 {
        assert!(register(&mut master, addr(50, 9000 + port), "new", t0).await);
    }
    let listed = all_pages(&mut master).await;
    assert_eq!(listed.len(), 100, "still the cap");
    assert_eq!(listed.iter().filter(|n| *n == "new").count(), 3);
}

/// Every listed server's name, page by page.
async fn all_pages(master: &mut Master<MemoryRegistry>) -> Vec<String> {
    let mut names = Vec::new();
    for page in 0.. {
        let request = ListRequest {
            filter: Filter::default(),
            page,
            page_size: 100,
        };
        let servers = master.list(&request).await.unwrap().servers;
        let done = servers.len() < 100;
        names.extend(servers.into_iter().map(|l| l.info.name));
        if done {
            break;
        }
    }
    names
}

#[test]
fn stats_written_with_the_old_per_ip_name_are_read_as_per_address() {
    let mut old = serde_json::to_value(crate::MasterStats::default()).unwrap();
    let fields = old.as_object_mut().unwrap();
    fields.remove("refused_per_address");
    fields.insert("refused_per_ip".into(), 3.into());
    let read: crate::MasterStats = serde_json::from_value(old).unwrap();
    assert_eq!(read.refused_per_address, 3);
}
