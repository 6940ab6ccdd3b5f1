//! The master's list port under abuse, over loopback: list floods from one
//! address are cut off, oversized requests are refused, a hostile master
//! cannot keep a browser paging forever; and its reachability probes, which
//! connect back only to the asker, within their limits.

use std::net::SocketAddr;
use std::time::Duration;

use switchboard::{BindScope, EndpointConfig, EndpointEvent, EndpointStream, Message};
use switchboard_master::protocol::{ListPage, MasterAction, MasterChannel, MAX_PAGE};
use switchboard_master::{self as master, Filter, Listed, MasterConfig, MasterServer, ServerInfo};

const WAIT: Duration = Duration::from_secs(10);

/// The fourth audit's figures (ignored: run them with `--ignored`).
#[path = "../figures/audit.rs"]
mod audit_figures;

async fn start(config: MasterConfig) -> SocketAddr {
    let master = MasterServer::builder().config(config).spawn().unwrap();
    let addr = master.local_addr();
    // Serves for the rest of the test process.
    std::mem::forget(master);
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_flood_from_one_address_is_cut_off() {
    let addr = start(MasterConfig {
        lists_per_minute: 60.0,
        ..MasterConfig::default()
    })
    .await;
    // A burst of a sixth of a minute's worth (10) is answered; more are not.
    let mut answered = 0;
    for _ in 0..20 {
        if master::fetch_list(addr, Filter::default(), WAIT)
            .await
            .is_ok()
        {
            answered += 1;
        }
    }
    assert_eq!(answered, 10);
    let stats = master::master_stats(addr, WAIT).await;
    assert!(stats.is_err(), "the address is still over its rate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_list_request_is_refused_at_the_frame_limit() {
    let addr = start(MasterConfig::default()).await;
    let filter = Filter {
        tags: vec![("k".repeat(3000), "v".repeat(3000))],
        ..Filter::default()
    };
    let result = master::fetch_list(addr, filter, WAIT).await;
    assert!(result.is_err(), "{result:?}");
    // A normal request from the same address still works.
    assert!(master::fetch_list(addr, Filter::default(), WAIT)
        .await
        .is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_master_saying_there_is_always_more_cannot_keep_a_browser_paging() {
    // A fake master: every page is full and the total is endless.
    let mut fake = EndpointStream::bind(BindScope::Loopback, 0, EndpointConfig::default()).unwrap();
    let addr = fake.local_addr();
    let handle = fake.handle();
    let pages = tokio::spawn(async move {
        let mut pages = 0u32;
        let info = ServerInfo {
            name: "x".into(),
            ..ServerInfo::default()
        };
        let listed = Listed {
            addr: "127.0.0.1:1".parse().unwrap(),
            info,
        };
        while let Some(event) = fake.next_event().await {
            match event {
                EndpointEvent::Received(incoming) => {
                    pages += 1;
                    let page = ListPage {
                        servers: vec![listed.clone(); MAX_PAGE as usize],
                        page: pages - 1,
                        total: u32::MAX,
                    };
                    let reply =
                        Message::new(MasterChannel::Master, MasterAction::Page, &page).unwrap();
                    let _ = handle.send_to(incoming.peer, &reply);
                }
                EndpointEvent::PeerDisconnected { .. } => break,
                _ => {}
            }
        }
        pages
    });
    let listed = tokio::time::timeout(
        Duration::from_secs(60),
        master::fetch_list(addr, Filter::default(), WAIT),
    )
    .await
    .expect("the browser stops on its own")
    .unwrap();
    assert_eq!(listed.len(), master::MAX_LISTED);
    assert_eq!(
        pages.await.unwrap(),
        (master::MAX_LISTED / MAX_PAGE as usize) as u32
    );
}

#[tokio::test]
async fn amplification_by_an_unpadded_heartbeat_earns_no_query() {
    let mut master =
        master::Master::new(MasterConfig::default(), master::MemoryRegistry::default());
    let now = std::time::Instant::now();
    let victim: SocketAddr = "192.0.2.7:27015".parse().unwrap();
    let bare = master::protocol::encode(&master::protocol::Datagram::Heartbeat {
        padding: Vec::new(),
    });
    assert_eq!(master.on_datagram(victim, &bare, now).await, None);
    assert_eq!(master.stats().short_heartbeats, 1);
    // A padded one earns its query, never longer than itself.
    let beat = master::protocol::heartbeat();
    let (to, query) = master
        .on_datagram(victim, &beat, now)
        .await
        .expect("a query");
    assert_eq!(to, victim);
    assert!(
        query.len() <= beat.len(),
        "{} > {}",
        query.len(),
        beat.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_queries_claiming_a_master_s_address_get_no_full_answer() {
    // The "master" is a UDP socket of the test's; it receives the game's
    // heartbeats and may ask once per heartbeat.
    let fake_master = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut announce = master::Announce::new(
        vec![fake_master.local_addr().unwrap()],
        ServerInfo {
            name: "a server with a long name to make its info reply big".into(),
            ..ServerInfo::default()
        },
    );
    announce.heartbeat_interval = Duration::from_secs(3600);
    let game = master::Announcer::start("127.0.0.1:0".parse().unwrap(), announce)
        .await
        .unwrap();
    let mut buf = vec![0; 2048];
    let (len, from) = tokio::time::timeout(WAIT, fake_master.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(from, game.local_addr());
    assert!(matches!(
        master::protocol::decode(&buf[..len]),
        Ok(master::protocol::Datagram::Heartbeat { .. })
    ));
    let query = |challenge| {
        master::protocol::encode(&master::protocol::Datagram::InfoQuery {
            challenge,
            padding: Vec::new(),
        })
    };
    // The master's one query after the heartbeat is answered in full.
    fake_master.send_to(&query(1), from).await.unwrap();
    let (len, _) = tokio::time::timeout(WAIT, fake_master.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let sent = query(1).len();
    assert!(
        len > sent,
        "the full answer ({len} bytes) to the awaited query"
    );
    // Any more "from the master" (forged sources, as far as the game can
    // tell) are a stranger's: small queries get nothing back.
    for challenge in 2..12 {
        fake_master.send_to(&query(challenge), from).await.unwrap();
    }
    let more =
        tokio::time::timeout(Duration::from_millis(300), fake_master.recv_from(&mut buf)).await;
    assert!(more.is_err(), "an answer to a forged query: {more:?}");
    // A padded query (a browser's) is still answered, within the rate.
    let padded = master::protocol::encode(&master::protocol::Datagram::InfoQuery {
        challenge: 99,
        padding: vec![0; 300],
    });
    fake_master.send_to(&padded, from).await.unwrap();
    let (len, _) = tokio::time::timeout(WAIT, fake_master.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(len <= padded.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_master_is_served_by_an_admin_server_started_beside_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let master = MasterServer::builder().spawn().unwrap();
    let source = std::sync::Arc::new(switchboard_master::MasterAdmin::new(
        master.handle().clone(),
    ));
    let admin = switchboard_admin::AdminServer::builder(source)
        .spawn()
        .unwrap();
    let addr = admin.local_addr();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response.contains("switchboard_master_servers_listed 0\n"),
        "{response}"
    );
    master.shutdown().await.unwrap();
}

// Reachability probes: a host asks the master to connect back to it.

const PROBE_WAIT: Duration = Duration::from_secs(5);

fn probing_master(config: MasterConfig) -> (switchboard_master::RunningMaster, SocketAddr) {
    let master = MasterServer::builder().config(config).spawn().unwrap();
    let addr = master.local_addr();
    (master, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_connects_back_to_the_host_and_finds_its_server() {
    let (_master, at) = probing_master(MasterConfig::default());
    let game = EndpointStream::bind(BindScope::Loopback, 0, EndpointConfig::default()).unwrap();
    let port = game.local_addr().port();
    let result = master::probe_reachable(at, port, PROBE_WAIT).await.unwrap();
    assert!(result.reachable, "{result:?}");
    // Connected back to where the request came from, and nowhere else.
    assert_eq!(
        result.addr,
        SocketAddr::new("127.0.0.1".parse().unwrap(), port)
    );
    assert_eq!(result.detail, "a Switchboard server answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_of_a_port_nothing_forwards_says_why() {
    let (_master, at) = probing_master(MasterConfig::default());
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let result = master::probe_reachable(at, port, PROBE_WAIT).await.unwrap();
    assert!(!result.reachable);
    assert!(result.detail.starts_with("refused"), "{result:?}");
    // Something that is not a Switchboard server.
    let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = other.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = other.accept().await {
            let _ =
                tokio::io::AsyncWriteExt::write_all(&mut stream, b"HTTP/1.1 400 Bad\r\n\r\n").await;
        }
    });
    let result = master::probe_reachable(at, port, PROBE_WAIT).await.unwrap();
    assert!(!result.reachable);
    assert_eq!(
        result.detail,
        "something answered, not a Switchboard server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_flood_from_one_address_gets_answers_without_connections() {
    let config = MasterConfig {
        probes_per_minute: 2.0,
        ..MasterConfig::default()
    };
    let (master, at) = probing_master(config);
    // A port that counts the connections made to it.
    let counted = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = counted.local_addr().unwrap().port();
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = connections.clone();
    tokio::spawn(async move {
        while let Ok(_accepted) = counted.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let mut details = Vec::new();
    for _ in 0..6 {
        let result = master::probe_reachable(at, port, PROBE_WAIT).await.unwrap();
        details.push(result.detail);
    }
    let refused = details
        .iter()
        .filter(|d| d.starts_with("not checked: too many probes"))
        .count();
    assert_eq!(refused, 4, "{details:?}");
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 2);
    let stats = master.handle().snapshot().await.unwrap().stats;
    assert_eq!((stats.probes, stats.probes_refused), (2, 4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_slots_held_by_one_address_leave_room_for_others() {
    // The audit: 11 addresses held the probe's 64 slots for 3 s.
    let config = MasterConfig {
        probes_per_minute: 600.0,
        probe_timeout: Duration::from_millis(1500),
        ..MasterConfig::default()
    };
    let (_master, at) = probing_master(config);
    // A port that takes connections and never says a word: each probe
    // holds its slot for the whole timeout.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let probes: Vec<_> = (0..6)
        .map(|_| tokio::spawn(master::probe_reachable(at, port, PROBE_WAIT)))
        .collect();
    let mut results = Vec::new();
    for probe in probes {
        results.push(probe.await.unwrap());
    }
    let checked = results
        .iter()
        .filter(|r| !r.as_ref().unwrap().detail.starts_with("not checked"))
        .count();
    assert_eq!(
        checked,
        MasterConfig::default().max_probes_in_flight_per_address,
        "{results:?}"
    );
}
