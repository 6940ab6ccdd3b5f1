use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use switchboard_agones::fake::{FakeSdk, GameServerSetup};
use switchboard_agones::{Agones, AgonesConfig, AgonesError, Event, Report};

const DEADLINE: Duration = Duration::from_secs(10);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn players_list() -> GameServerSetup {
    GameServerSetup {
        lists: vec![("players".into(), 10)],
        ..GameServerSetup::default()
    }
}

#[test]
fn the_public_address_is_the_node_s_and_the_mapped_port() {
    let rt = runtime();
    let setup = GameServerSetup {
        ports: vec![("game".into(), 7654), ("quic".into(), 7655)],
        ..GameServerSetup::default()
    };
    let fake = rt.block_on(FakeSdk::start(setup)).unwrap();
    let agones = Agones::connect(config(fake.port())).unwrap();
    assert_eq!(
        agones.public_addr("game").as_deref(),
        Some("127.0.0.1:7654")
    );
    assert_eq!(agones.public_addr("websocket"), None);
}

fn config(port: u16) -> AgonesConfig {
    AgonesConfig {
        port: Some(port),
        health_interval: Duration::from_millis(200),
        ..AgonesConfig::default()
    }
}

#[test]
fn without_a_sidecar_connect_fails_with_a_clear_error() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let started = Instant::now();
    let err = Agones::connect(AgonesConfig {
        connect_timeout: Duration::from_millis(500),
        ..config(port)
    })
    .unwrap_err();
    assert!(matches!(err, AgonesError::Unreachable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("sidecar") && text.contains(&port.to_string()),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn ready_then_health_every_interval_and_none_while_the_server_is_stuck() {
    let rt = runtime();
    let fake = rt.block_on(FakeSdk::start(players_list())).unwrap();
    let agones = Agones::connect(config(fake.port())).unwrap();
    assert_eq!(fake.seen().ready, 0, "not Ready before serve");
    let stuck = Arc::new(AtomicBool::new(false));
    let stuck_probes = Arc::new(AtomicUsize::new(0));
    let (probe_stuck, probed_stuck) = (stuck.clone(), stuck_probes.clone());
    let _running = agones.serve(
        move || {
            let stuck = probe_stuck.load(Ordering::SeqCst);
            if stuck {
                probed_stuck.fetch_add(1, Ordering::SeqCst);
            }
            async move {
                if stuck {
                    std::future::pending::<()>().await;
                }
                Some(Report::default())
            }
        },
        |_| {},
    );
    rt.block_on(async {
        let seen = fake
            .wait_for(DEADLINE, |s| s.ready == 1 && s.health.len() >= 3)
            .await
            .expect("Ready then Health");
        assert_eq!(seen.state, "Ready");
        stuck.store(true, Ordering::SeqCst);
        let until = tokio::time::Instant::now() + DEADLINE;
        while stuck_probes.load(Ordering::SeqCst) < 3 {
            assert!(tokio::time::Instant::now() < until, "probed while stuck");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Five intervals stuck (the first probe's Health may still have
        // been on its way when it began): no Health in the last four.
        let quiet_from = Instant::now() - Duration::from_millis(200);
        let seen = fake.seen();
        assert!(
            seen.health.iter().all(|&at| at < quiet_from),
            "Health while the server was stuck"
        );
        let before = seen.health.len();
        stuck.store(false, Ordering::SeqCst);
        let seen = fake
            .wait_for(DEADLINE, |s| s.health.len() > before)
            .await
            .expect("Health again once it answers");
        assert!(seen.longest_health_gap(quiet_from) >= Duration::from_millis(200));
    });
}

#[test]
fn an_allocation_is_told_with_its_labels_and_players_go_into_the_list() {
    let rt = runtime();
    let fake = rt.block_on(FakeSdk::start(players_list())).unwrap();
    let agones = Agones::connect(config(fake.port())).unwrap();
    let (events, heard) = mpsc::channel();
    let players = Arc::new(std::sync::Mutex::new(Report::default()));
    let probed = players.clone();
    let _running = agones.serve(
        move || {
            let report = probed.lock().unwrap().clone();
            async move { Some(report) }
        },
        move |event| {
            let _ = events.send(event);
        },
    );
    rt.block_on(async {
        fake.wait_for(DEADLINE, |s| s.ready == 1).await.unwrap();
        fake.allocate(&[
            ("switchboard.dev/scenario", "islands"),
            ("switchboard.dev/players", "2"),
        ]);
    });
    match heard.recv_timeout(DEADLINE).expect("an event") {
        Event::Allocated(allocation) => {
            assert_eq!(allocation.scenario.as_deref(), Some("islands"));
            assert_eq!(allocation.players, Some(2));
        }
        other => panic!("{other:?}"),
    }
    players.lock().unwrap().players = ["1".to_string(), "2".to_string()].into();
    rt.block_on(async {
        let seen = fake
            .wait_for(DEADLINE, |s| s.lists["players"] == ["1", "2"])
            .await
            .expect("both players listed");
        assert_eq!(seen.state, "Allocated");
    });
    players.lock().unwrap().players = ["2".to_string()].into();
    rt.block_on(async {
        fake.wait_for(DEADLINE, |s| s.lists["players"] == ["2"])
            .await
            .expect("the one who left unlisted");
    });
    players.lock().unwrap().ended = true;
    assert!(matches!(
        heard.recv_timeout(DEADLINE).expect("an event"),
        Event::Shutdown
    ));
    rt.block_on(async {
        let seen = fake.wait_for(DEADLINE, |s| s.shutdown == 1).await.unwrap();
        assert_eq!(seen.state, "Shutdown");
    });
}

#[test]
fn after_the_sidecar_restarts_health_and_the_watch_come_back() {
    let first = runtime();
    let fake = first.block_on(FakeSdk::start(players_list())).unwrap();
    let port = fake.port();
    let agones = Agones::connect(config(port)).unwrap();
    let (events, heard) = mpsc::channel();
    let _running = agones.serve(
        || async { Some(Report::default()) },
        move |event| {
            let _ = events.send(event);
        },
    );
    first
        .block_on(fake.wait_for(DEADLINE, |s| s.ready == 1 && s.health.len() >= 2))
        .expect("Health from the first sidecar");
    // The sidecar goes, with every connection it had.
    drop(fake);
    first.shutdown_timeout(Duration::from_secs(1));
    let second = runtime();
    let fake = second
        .block_on(FakeSdk::start_on(port, players_list()))
        .expect("the port again");
    second
        .block_on(fake.wait_for(DEADLINE, |s| s.health.len() >= 2))
        .expect("Health to the new sidecar");
    fake.allocate(&[("switchboard.dev/scenario", "islands")]);
    match heard
        .recv_timeout(DEADLINE)
        .expect("the allocation, watched again")
    {
        Event::Allocated(allocation) => {
            assert_eq!(allocation.scenario.as_deref(), Some("islands"))
        }
        other => panic!("{other:?}"),
    }
}
