//! The load tester against a relay in this process: what it reports is
//! what happened.

use std::time::Duration;

use switchboard_load::{self as load, LoadConfig, LoadReport, Phases};
use switchboard_relay::RelayServer;

async fn run(bots: usize, rate: f64, zone_size: usize, seconds: u64) -> LoadReport {
    let relay = RelayServer::builder().spawn().unwrap();
    load::run(plan(&relay, bots, rate, zone_size, seconds), |_, _, _| {}).await
}

/// `bots` bots at `rate` Hz in zones of `zone_size` for `seconds`, standing
/// still, one frame a message.
fn plan(
    relay: &switchboard_relay::RunningRelay,
    bots: usize,
    rate: f64,
    zone_size: usize,
    seconds: u64,
) -> LoadConfig {
    plan_for(relay.native_addr(), bots, rate, zone_size, seconds)
}

/// [`plan`] against the relay at `addr`.
fn plan_for(
    addr: std::net::SocketAddr,
    bots: usize,
    rate: f64,
    zone_size: usize,
    seconds: u64,
) -> LoadConfig {
    LoadConfig {
        addr,
        websocket: None,
        quic: None,
        also: Vec::new(),
        bots,
        rate,
        zone_size,
        duration: Duration::from_secs(seconds),
        phases: Phases::Spread,
        walk: None,
        options: Default::default(),
        stamp_every: 1,
        tls: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transform_is_counted_once_at_each_zone_mate_and_none_is_lost() {
    // 40 bots in zones of 10, 20 Hz for 2 s: 40 transforms each, and each
    // reaches the other 9 of its zone (live, or in the zone-entry snapshot
    // of a bot that entered after it was sent).
    let report = run(40, 20.0, 10, 2).await;
    assert_eq!(report.bots_connected, 40);
    assert_eq!(report.sent, 40 * 40);
    // (A bot whose first send came late on a busy machine was shown each
    // other's last transform when it entered: the ones before, not heard,
    // are counted apart.)
    assert_eq!(
        report.received + report.before_joining,
        report.sent * 9,
        "{report:?}"
    );
    assert_eq!(
        (report.lost, report.disconnects, report.errors),
        (0, 0, 0),
        "{report:?}"
    );
    assert!(report.latency_ms_p50 > 0.0, "{report:?}");
    assert!(report.latency_ms_p50 <= report.latency_ms_p99);
    assert!(report.latency_ms_max < 1000.0, "{report:?}");
    // Read off the sockets: a relayed transform's frame is some 50 bytes.
    assert!(
        (30.0..120.0).contains(&report.wire_bytes_per_delivery),
        "{report:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_entry_snapshot_is_counted_but_its_age_is_not_latency() {
    // Two bots in one zone at 0.5 Hz: the second sends first 1.24 s into
    // the interval (spread phases) and enters the zone then, shown the
    // first bot's transform of 1.24 s before. That delivery counts; its age
    // is not the relay's latency.
    let report = run(2, 0.5, 2, 4).await;
    assert_eq!(report.sent, 4);
    assert_eq!(report.received, 4, "{report:?}");
    assert_eq!(report.lost, 0);
    assert!(report.latency_ms_max < 500.0, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_load_testers_first_zone_is_the_pages_and_its_bots_stand_in_the_pages_world() {
    let relay = RelayServer::builder().spawn().unwrap();
    let config = plan(&relay, 24, 10.0, 12, 2);
    let load = tokio::spawn(load::run(config, |_, _, _| {}));
    // The browser demo's default zone holds the first zone's bots, inside
    // its 100 × 75 world (`server/assets/relay-demo.html`).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let clients = relay.clients().await;
        let in_demo: Vec<_> = clients
            .iter()
            .filter(|c| c.zone.as_deref() == Some("demo"))
            .collect();
        let in_second = clients
            .iter()
            .filter(|c| c.zone.as_deref() == Some("demo-1"))
            .count();
        // Both zones full (the bots join one by one).
        if in_demo.len() == 12 && in_second == 12 {
            for client in &in_demo {
                let [x, _, z] = client.last.as_ref().unwrap().position;
                assert!(
                    (0.0..=100.0).contains(&x) && (0.0..=75.0).contains(&z),
                    "{x}, {z}"
                );
            }
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "12 bots in demo and 12 in demo-1"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = load.await.unwrap();
    assert_eq!(report.lost, 0, "{report:?}");
}

/// Walking bots against a relay with (or without) interest by distance.
async fn walk(interest: bool, bots: usize, seconds: u64) -> LoadReport {
    walk_with(interest, bots, seconds, |_, _| {}).await
}

/// The same, the relay's and the bots' configurations changed by `adjust`.
async fn walk_with(
    interest: bool,
    bots: usize,
    seconds: u64,
    adjust: impl FnOnce(&mut switchboard_relay::RelayConfig, &mut LoadConfig),
) -> LoadReport {
    let mut relay_config = switchboard_relay::RelayConfig {
        interest: interest
            .then(|| switchboard_relay::interest::InterestConfig::around(30.0, None, None, [0, 2])),
        ..Default::default()
    };
    let mut config = LoadConfig {
        // A small world, so that neighbours come and go.
        walk: Some(load::Walk::new(150.0, 6.0, 30.0)),
        ..plan_for("127.0.0.1:1".parse().unwrap(), bots, 10.0, bots, seconds)
    };
    adjust(&mut relay_config, &mut config);
    let relay = RelayServer::builder().config(relay_config).spawn().unwrap();
    config.addr = relay.native_addr();
    load::run(config, |_, _, _| {}).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walking_bots_hear_every_neighbour_in_view_and_nobody_past_the_leave_radius() {
    let report = walk(true, 60, 4).await;
    assert_eq!(report.bots_connected, 60, "{report:?}");
    assert!(report.neighbour_checks > 100, "{report:?}");
    assert_eq!(
        (report.unheard_neighbours, report.heard_too_far),
        (0, 0),
        "{report:?}"
    );
    // Each hears only some of the 59 others.
    assert!(report.received < report.sent * 59 / 2, "{report:?}");
    assert_eq!((report.disconnects, report.errors), (0, 0), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walking_checks_catch_a_relay_without_interest_by_distance() {
    // Zone mode relays everyone to everyone: the far ones are violations.
    let report = walk(false, 30, 2).await;
    assert!(report.heard_too_far > 0, "{report:?}");
    assert_eq!(report.unheard_neighbours, 0, "{report:?}");
}

/// 40 bots in zones of 10 at 20 Hz for 2 s against a relay writing at
/// 10 Hz, asking for batches, compact transforms or neither.
async fn ticked(options: switchboard_relay::RelayOptions) -> LoadReport {
    let config = switchboard_relay::RelayConfig {
        pacing: switchboard::socket::PacerConfig::tick(10.0),
        ..Default::default()
    };
    let relay = RelayServer::builder().config(config).spawn().unwrap();
    let config = LoadConfig {
        options,
        ..plan(&relay, 40, 20.0, 10, 2)
    };
    load::run(config, |_, _, _| {}).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_bots_in_tick_mode_get_every_transform_in_one_frame_a_tick() {
    let batch = switchboard_relay::RelayOptions {
        batch: true,
        compact: false,
        datagrams: false,
        webtransport_redirects: false,
        compact_datagrams: false,
    };
    let compact = switchboard_relay::RelayOptions {
        batch: false,
        compact: true,
        datagrams: false,
        webtransport_redirects: false,
        compact_datagrams: false,
    };
    let (batched, plain, compact) =
        tokio::join!(ticked(batch), ticked(Default::default()), ticked(compact));
    // Every transform reaches the other 9 of its zone, in batches.
    assert_eq!(batched.sent, 40 * 40, "{batched:?}");
    assert_eq!(
        batched.received + batched.before_joining,
        batched.sent * 9,
        "{batched:?}"
    );
    assert_eq!((batched.lost, batched.errors), (0, 0), "{batched:?}");
    // A tick's transforms share a frame: fewer bytes than a frame each.
    assert!(
        batched.wire_bytes_per_delivery < plain.wire_bytes_per_delivery - 3.0,
        "{batched:?}\n{plain:?}"
    );
    // Each waited up to a tick (100 ms), not much more.
    assert!(batched.latency_ms_p99 < 200.0, "{batched:?}");
    // Compact ones too, every one, in a fraction of the bytes (each
    // carries the bots' stamp, about 20 bytes, all the same).
    assert_eq!(
        compact.received + compact.before_joining,
        compact.sent * 9,
        "{compact:?}"
    );
    assert_eq!((compact.lost, compact.errors), (0, 0), "{compact:?}");
    assert!(
        compact.wire_bytes_per_delivery < batched.wire_bytes_per_delivery * 0.7,
        "{compact:?}\n{batched:?}"
    );
}

/// 40 QUIC bots at 20 Hz in zones of 10 on a relay ticking at 10 Hz, with
/// `options` (datagrams are asked for over QUIC).
async fn quic_ticked(options: switchboard_relay::RelayOptions) -> LoadReport {
    let mut config = switchboard_relay::RelayConfig {
        pacing: switchboard::socket::PacerConfig::tick(10.0),
        ..Default::default()
    };
    config.server.quic = Some(switchboard::socket::quic::QuicConfig::on(0));
    let relay = RelayServer::builder().config(config).spawn().unwrap();
    let config = LoadConfig {
        quic: relay.quic_addr(),
        options,
        ..plan(&relay, 40, 20.0, 10, 2)
    };
    load::run(config, |_, _, _| {}).await
}

/// On loopback nothing is lost: every transform reaches the other 9 of its
/// zone, as datagrams, each within a tick or so.
fn every_transform_as_datagrams(report: &LoadReport) {
    assert_eq!(
        (report.bots_connected, report.disconnects),
        (40, 0),
        "{report:?}"
    );
    // The bots' view came as datagrams: one a tick or more each.
    assert!(report.datagrams_received >= 40 * 15, "{report:?}");
    assert_eq!(report.sent, 40 * 40, "{report:?}");
    // (A bot whose first send came late on a busy machine was shown each
    // other's last transform when it entered: the ones before, not heard,
    // are counted apart.)
    assert_eq!(
        report.received + report.before_joining,
        report.sent * 9,
        "{report:?}"
    );
    assert_eq!((report.lost, report.errors), (0, 0), "{report:?}");
    assert!(report.latency_ms_p99 < 200.0, "{report:?}");
}

/// Plain datagrams, then compact view datagrams (compact over QUIC: each
/// record against a state the bot acknowledged): every transform arrives,
/// the compact ones in fewer bytes (each carries the bots' stamp, about 20
/// bytes, in both runs). One after the other: two at once would lose
/// datagrams on a busy machine's loopback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quic_bots_in_tick_mode_get_every_transform_as_datagrams_plain_or_compact() {
    let plain = quic_ticked(Default::default()).await;
    every_transform_as_datagrams(&plain);
    let compact = switchboard_relay::RelayOptions {
        compact: true,
        ..Default::default()
    };
    let compact = quic_ticked(compact).await;
    every_transform_as_datagrams(&compact);
    assert!(
        compact.wire_bytes_per_delivery < plain.wire_bytes_per_delivery * 0.75,
        "{compact:?}\n{plain:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walking_compact_bots_hear_what_plain_ones_do_in_at_most_16_bytes_a_transform() {
    let report = walk_with(true, 60, 4, |relay, bots| {
        relay.pacing = switchboard::socket::PacerConfig::tick(20.0);
        bots.options.compact = true;
        // The bots' stamp (about 20 bytes) on one transform in ten: the
        // rest is what a game's walking players cost.
        bots.stamp_every = 10;
    })
    .await;
    assert!(report.neighbour_checks > 100, "{report:?}");
    assert_eq!(
        (report.unheard_neighbours, report.heard_too_far),
        (0, 0),
        "{report:?}"
    );
    assert_eq!((report.disconnects, report.errors), (0, 0), "{report:?}");
    assert!(report.wire_bytes_per_delivery <= 16.0, "{report:?}");
    // Latency is still timed, on the stamped ones: within two ticks.
    assert!(report.latency_ms_p50 > 0.0, "{report:?}");
    assert!(report.latency_ms_p99 < 150.0, "{report:?}");
}
