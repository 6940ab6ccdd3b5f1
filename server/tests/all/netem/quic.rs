//! QUIC through the emulated link: the relay's transforms as datagrams
//! against TCP (a CI test at 5 % loss), and the measurements of
//! `docs/PERFORMANCE.md` ("QUIC through a lossy link") behind `#[ignore]`.

use std::time::Duration;

use super::{bots_across, link, number, relay_lateness, serve, tester_across, Over, QUIC_PORT};
use switchboard_netem::{Link, LinkConfig};

#[test]
fn relay_transforms_as_quic_datagrams_through_five_percent_loss_are_dropped_not_late() {
    // The same bots and link as over TCP, side by side in one run: over
    // QUIC datagrams a lost transform is gone and the next one on time.
    let runs: Vec<_> = [Over::Tcp, Over::Quic]
        .into_iter()
        .map(|over| std::thread::spawn(move || (over, relay_lateness(0.05, over))))
        .collect();
    let mut p99 = Vec::new();
    for run in runs {
        let (over, report) = run.join().unwrap();
        let Some(report) = report else { return };
        println!(
            "relay over {over:?}, 8 bots x 20 Hz, 25 +- 2 ms each way, 5 % loss: lateness p50 {:.1} ms, p95 {:.1}, p99 {:.1}, max {:.1}; received {}, lost {}, datagrams {}",
            number(&report, "latency_ms_p50"),
            number(&report, "latency_ms_p95"),
            number(&report, "latency_ms_p99"),
            number(&report, "latency_ms_max"),
            report["received"],
            report["lost"],
            report["datagrams_received"],
        );
        assert_eq!(report["bots_connected"], 8, "{report}");
        assert_eq!(report["disconnects"], 0, "{report}");
        assert_eq!(report["errors"], 0, "{report}");
        p99.push(number(&report, "latency_ms_p99"));
        if over == Over::Quic {
            let (received, lost) = (number(&report, "received"), number(&report, "lost"));
            assert!(
                number(&report, "datagrams_received") > 0.0,
                "the transforms came as datagrams: {report}"
            );
            // Two crossings at 5 % each: about one in ten never arrives.
            let share = lost / (received + lost);
            assert!(
                (0.03..0.2).contains(&share),
                "lost ones are dropped, not retransmitted: {share} {report}"
            );
        }
    }
    let (tcp, quic) = (p99[0], p99[1]);
    // Two crossings: a 50 ms floor, 4 ms of jitter (about 55 ms on a quiet
    // machine, where TCP's passes 100 ms). Compared with TCP's, measured at
    // the same time: the user-space link and a loaded machine's scheduling
    // delay both alike.
    assert!(
        quic < tcp * 0.75,
        "over datagrams nothing waits for a lost one: p99 {quic} ms (TCP {tcp} ms)"
    );
    assert!(
        tcp > 100.0,
        "over TCP retransmissions hold transforms back: {tcp} ms"
    );
}

/// 50 ms each way with up to 20 ms of jitter, and `loss`: the links of
/// `docs/PERFORMANCE.md` ("QUIC through a lossy link"), `None` without root.
fn transatlantic_mobile(loss: f64) -> Option<Link> {
    link(LinkConfig {
        delay: Duration::from_millis(50),
        jitter: Duration::from_millis(20),
        loss,
        seed: 5,
        ..LinkConfig::default()
    })
}

/// The figures of `docs/PERFORMANCE.md` ("QUIC through a lossy link"):
/// 300 bots × 20 Hz in zones of 20, the relay in tick mode at 20 Hz,
/// through 50 ms each way with up to 20 ms of jitter, at 1 % then 5 %
/// loss, over TCP and over QUIC datagrams, one after the other. Two
/// minutes, and it wants the machine to itself: run it by hand,
/// `cargo test --release -p switchboard-server --test all netem::quic::measure_transforms -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement of minutes: run by hand"]
fn measure_transforms_over_quic_and_tcp_through_100_ms_round_trip_20_ms_jitter_and_loss() {
    for loss in [0.01, 0.05] {
        for over in [Over::Tcp, Over::Quic] {
            let Some(link) = transatlantic_mobile(loss) else {
                return;
            };
            let report = bots_across(
                &link,
                over,
                &["--tick-hz", "20"],
                &[
                    "--count",
                    "300",
                    "--rate",
                    "20",
                    "--zone-size",
                    "20",
                    "--seconds",
                    "20",
                    "--batch",
                ],
            );
            println!(
                "transforms, {:.0} % loss, {over:?}: p50 {:.1} ms, p95 {:.1}, p99 {:.1}, max {:.1}; connected {}, received {}, lost {}, disconnects {}",
                loss * 100.0,
                number(&report, "latency_ms_p50"),
                number(&report, "latency_ms_p95"),
                number(&report, "latency_ms_p99"),
                number(&report, "latency_ms_max"),
                report["bots_connected"],
                report["received"],
                report["lost"],
                report["disconnects"],
            );
        }
    }
}

/// The requests' figures beside them: 30 board clients, two requests a
/// second each for 20 s (each accepted one broadcast to all), over TCP
/// and over the QUIC stream, through the same links:
/// `cargo test --release -p switchboard-server --test all netem::quic::measure_requests -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement of minutes: run by hand"]
fn measure_requests_over_the_quic_stream_and_tcp_through_100_ms_round_trip_and_loss() {
    for loss in [0.01, 0.05] {
        for over in [Over::Tcp, Over::Quic] {
            let Some(link) = transatlantic_mobile(loss) else {
                return;
            };
            let report = requests_across(&link, over);
            println!(
                "requests, {:.0} % loss, {over:?}: p50 {:.1} ms, p99 {:.1}, max {:.1}; welcomed {}, accepted {}, disconnects {}",
                loss * 100.0,
                number(&report, "latency_ms_p50"),
                number(&report, "latency_ms_p99"),
                number(&report, "latency_ms_max"),
                report["welcomed"],
                report["accepted"],
                report["disconnects"],
            );
        }
    }
}

/// 30 clients of a board server across `link`, two requests a second each
/// for 20 s, over TCP or the QUIC stream: the `requests` tester's JSON
/// report. (30: all of them in their handshakes at once stay under half of
/// `max_pending_handshakes`, so a server that sees them all come from one
/// address does not turn any away.)
fn requests_across(link: &Link, over: Over) -> serde_json::Value {
    let quic_port = QUIC_PORT.to_string();
    let (_server, port, pinned) = serve(link, &["--quic-port", quic_port.as_str()]);
    tester_across(
        link,
        over,
        "requests",
        port,
        pinned,
        &["--count", "30", "--rate", "2", "--seconds", "20"],
    )
}
