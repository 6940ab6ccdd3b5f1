//! `/metrics` of every mode, read by a real parser of the Prometheus text
//! format (`openmetrics-parser`), follows the conventions: one prefix per
//! mode, counters end in `_total` and never fall (not even when a client
//! leaves), the standard `process_*` metrics and a build-info gauge; with
//! Redis, the process's calls to it.

use crate::support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use openmetrics_parser::prometheus::parse_prometheus;
use openmetrics_parser::{PrometheusType, PrometheusValue};
use switchboard::{ClientConfig, NetworkClient};

/// Every sample of a scrape: (family, type, labels rendered) → value.
type Samples = HashMap<(String, String), (PrometheusType, f64)>;

fn scrape(admin: &str) -> Samples {
    let (status, body) = support::http(admin, "GET", "/metrics", None, "");
    assert_eq!(status, 200);
    let text = String::from_utf8(body).unwrap();
    let exposition = parse_prometheus(&text).unwrap_or_else(|e| panic!("{e:?} in\n{text}"));
    let mut samples = Samples::new();
    for (name, family) in exposition.families {
        for sample in family.iter_samples() {
            let value = match &sample.value {
                PrometheusValue::Counter(c) => c.value.as_f64(),
                PrometheusValue::Gauge(g) | PrometheusValue::Unknown(g) => g.as_f64(),
                PrometheusValue::Histogram(h) => h.count.unwrap_or_default() as f64,
                PrometheusValue::Summary(s) => s.count.unwrap_or_default() as f64,
            };
            let labels = sample.get_labelset().map_or(String::new(), |set| {
                let pairs: Vec<String> = set.iter().map(|(k, v)| format!("{k}={v}")).collect();
                pairs.join(",")
            });
            samples.insert((name.clone(), labels), (family.family_type.clone(), value));
        }
    }
    samples
}

fn value(samples: &Samples, family: &str) -> f64 {
    samples
        .iter()
        .filter(|((name, _), _)| name == family)
        .map(|(_, (_, v))| v)
        .sum()
}

/// The conventions every scrape keeps, for a mode whose own metrics start
/// with `prefix`.
fn check_conventions(mode: &str, prefix: &str, samples: &Samples) {
    for ((name, _), (kind, _)) in samples {
        let standard = ["switchboard_up", "switchboard_build_info"].contains(&name.as_str());
        assert!(
            standard
                || name.starts_with(prefix)
                || name.starts_with("switchboard_redis_")
                || name.starts_with("switchboard_endpoint_")
                || name.starts_with("process_"),
            "{mode}: {name} outside {prefix}*"
        );
        match kind {
            PrometheusType::Counter => assert!(name.ends_with("_total"), "{mode}: counter {name}"),
            PrometheusType::Gauge => assert!(!name.ends_with("_total"), "{mode}: gauge {name}"),
            PrometheusType::Histogram => assert!(name.ends_with("_seconds"), "{mode}: {name}"),
            other => panic!("{mode}: {name} is a {other:?}"),
        }
    }
    for family in [
        "switchboard_up",
        "switchboard_build_info",
        "process_cpu_seconds_total",
        "process_start_time_seconds",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
    ] {
        let present = samples.keys().any(|(name, _)| name == family);
        // A process just started may not have used a tick of CPU yet.
        let positive = family == "process_cpu_seconds_total" || value(samples, family) > 0.0;
        assert!(present && positive, "{mode}: {family}");
    }
    let version = samples
        .keys()
        .find(|(name, _)| name == "switchboard_build_info")
        .map(|(_, labels)| labels.clone())
        .unwrap();
    assert!(version.contains(env!("CARGO_PKG_VERSION")), "{version}");
}

#[test]
fn metrics_of_every_mode_parse_and_follow_the_prometheus_conventions() {
    for (mode, args, prefix) in [
        ("board", &[][..], "switchboard_manager_"),
        ("rooms", &["rooms"][..], "switchboard_manager_"),
        ("relay", &["relay"][..], "switchboard_relay_"),
        ("master", &["master"][..], "switchboard_master_"),
    ] {
        let mut all: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        all.extend(["--port", "0", "--admin-port", "0"].map(std::ffi::OsStr::new));
        let (_proc, _port, admin) = support::start_with_admin(&all);
        let samples = scrape(&admin);
        check_conventions(mode, prefix, &samples);
        if mode == "relay" {
            let family = "switchboard_relay_queue_wait_seconds";
            assert!(samples.keys().any(|(name, _)| name == family), "{family}");
        }
    }
}

#[test]
fn a_managers_traffic_counters_never_fall_when_its_clients_leave() {
    let (_proc, port, admin) =
        support::start_with_admin(&["--port", "0", "--admin-port", "0"].map(std::ffi::OsStr::new));
    let before = scrape(&admin);
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut ann = NetworkClient::connect(addr, ClientConfig::named("ann"));
    support::wait_until("ann welcomed", Duration::from_secs(10), || {
        ann.poll_timeout(Duration::from_millis(20));
        ann.is_welcomed()
    });
    let with_ann = scrape(&admin);
    drop(ann);
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let now = scrape(&admin);
        if value(&now, "switchboard_manager_clients") == 0.0 {
            break now;
        }
        assert!(Instant::now() < deadline, "ann gone");
        std::thread::sleep(Duration::from_millis(20));
    };
    for family in [
        "switchboard_manager_received_bytes_total",
        "switchboard_manager_sent_bytes_total",
        "switchboard_manager_received_frames_total",
        "switchboard_manager_sent_frames_total",
    ] {
        assert!(
            value(&with_ann, family) > value(&before, family),
            "{family} grew"
        );
    }
    // Every counter, labelled or not, is at least where it was.
    for (key, (kind, was)) in &with_ann {
        if matches!(kind, PrometheusType::Counter) {
            let now = after.get(key).map_or(0.0, |(_, v)| *v);
            assert!(now >= *was, "{key:?} fell from {was} to {now}");
        }
    }
}

#[test]
fn a_mode_on_redis_reports_its_calls_to_redis_their_failures_and_latency() {
    let redis = switchboard_redis::testing::RedisProcess::start().unwrap();
    let url = redis.url();
    let args = ["relay", "--port", "0", "--admin-port", "0", "--redis", &url];
    let (_proc, _port, admin) = support::start_with_admin(&args.map(std::ffi::OsStr::new));
    let samples = scrape(&admin);
    check_conventions("relay on redis", "switchboard_relay_", &samples);
    // Joining the zone directory took calls; none failed.
    let calls = value(&samples, "switchboard_redis_calls_total");
    assert!(calls > 0.0, "calls: {calls}");
    assert_eq!(value(&samples, "switchboard_redis_errors_total"), 0.0);
    // The histogram saw every call (its count is the family's value here).
    let timed = value(&samples, "switchboard_redis_call_duration_seconds");
    assert!(timed >= calls, "{timed} timed of {calls}");
    // Redis gone: the next calls fail, and are counted as failed.
    drop(redis);
    support::wait_until("failed calls counted", Duration::from_secs(15), || {
        value(&scrape(&admin), "switchboard_redis_errors_total") > 0.0
    });
}
