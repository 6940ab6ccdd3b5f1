//! The Prometheus text exposition format (version 0.0.4) of a [`Snapshot`].

use std::fmt::Write;

use crate::source::{Counter, CounterKind, Snapshot};

/// `snapshot`'s counters as Prometheus text, plus `switchboard_up` and
/// `switchboard_uptime_seconds` labelled with the mode. Metrics of one name
/// are grouped under one `# HELP` and `# TYPE`.
pub fn render(mode: &str, uptime_seconds: f64, snapshot: &Snapshot) -> String {
    let mut out = String::new();
    let mut emitted: Vec<&str> = Vec::new();
    let _ = writeln!(
        out,
        "# HELP switchboard_up Whether the server is serving (1)."
    );
    let _ = writeln!(out, "# TYPE switchboard_up gauge");
    let _ = writeln!(out, "switchboard_up{{mode=\"{}\"}} 1", escape(mode));
    let _ = writeln!(
        out,
        "# HELP switchboard_uptime_seconds Seconds since the server started."
    );
    let _ = writeln!(out, "# TYPE switchboard_uptime_seconds gauge");
    let _ = writeln!(
        out,
        "switchboard_uptime_seconds{{mode=\"{}\"}} {uptime_seconds}",
        escape(mode)
    );
    for counter in &snapshot.counters {
        let family = counter.family();
        if emitted.contains(&family) {
            continue;
        }
        emitted.push(family);
        let kind = match counter.kind {
            CounterKind::Counter => "counter",
            CounterKind::Gauge => "gauge",
            CounterKind::Histogram => "histogram",
        };
        let _ = writeln!(out, "# HELP {family} {}", counter.help);
        let _ = writeln!(out, "# TYPE {family} {kind}");
        for same in snapshot.counters.iter().filter(|c| c.family() == family) {
            let labels: Vec<String> = same
                .labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            let labels = if labels.is_empty() {
                String::new()
            } else {
                format!("{{{}}}", labels.join(","))
            };
            let _ = writeln!(out, "{}{labels} {}", same.name, same.value);
        }
    }
    out
}

/// The serving process's own counters, by Prometheus' standard names:
/// `process_cpu_seconds_total` and `process_resident_memory_bytes` (read
/// from `/proc` on Linux; nothing elsewhere).
pub fn process_counters() -> Vec<Counter> {
    let mut counters = Vec::new();
    let ticks_per_second = 100.0; // USER_HZ, 100 on every Linux
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
        if let (Some(user), Some(system)) = (ticks(11), ticks(12)) {
            let mut cpu = Counter::total(
                "process_cpu_seconds_total",
                "User and system CPU time of the server's process, in seconds.",
                0,
            );
            cpu.value = (user + system) / ticks_per_second;
            counters.push(cpu);
        }
    }
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok());
        if let Some(kib) = rss_kib {
            counters.push(Counter::gauge(
                "process_resident_memory_bytes",
                "Resident memory of the server's process, in bytes.",
                kib * 1024.0,
            ));
        }
    }
    counters
}

/// A label value as the format wants it: backslash, quote and newline
/// escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_grouped_by_name_with_escaped_labels() {
        let snapshot = Snapshot {
            clients: Vec::new(),
            counters: vec![
                Counter::total("x_total", "Things.", 3).with_label("reason", "slow"),
                Counter::gauge("y", "Now.", 1.5),
                Counter::total("x_total", "Things.", 4).with_label("reason", "a \"b\"\n"),
            ],
            places: Vec::new(),
        };
        let text = render("relay", 2.0, &snapshot);
        assert_eq!(text.matches("# TYPE x_total counter").count(), 1);
        assert!(text.contains("x_total{reason=\"slow\"} 3\n"));
        assert!(text.contains("x_total{reason=\"a \\\"b\\\"\\n\"} 4\n"));
        assert!(text.contains("# TYPE y gauge\ny 1.5\n"));
        assert!(text.contains("switchboard_up{mode=\"relay\"} 1\n"));
    }

    #[test]
    fn the_process_reports_its_cpu_and_memory() {
        let counters = process_counters();
        let value = |name: &str| counters.iter().find(|c| c.name == name).map(|c| c.value);
        assert!(value("process_resident_memory_bytes").is_some_and(|v| v > 1e6));
        assert!(value("process_cpu_seconds_total").is_some_and(|v| v >= 0.0));
    }

    #[test]
    fn a_histogram_is_one_family_with_cumulative_buckets() {
        let snapshot = Snapshot {
            counters: Counter::histogram("t_seconds", "Times.", &[(0.001, 2), (0.01, 3)], 1, 0.05),
            ..Snapshot::default()
        };
        let text = render("rooms", 1.0, &snapshot);
        assert_eq!(
            text.matches("# TYPE t_seconds histogram\n").count(),
            1,
            "{text}"
        );
        assert!(
            text.contains("t_seconds_bucket{le=\"0.001\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("t_seconds_bucket{le=\"0.01\"} 5\n"), "{text}");
        assert!(text.contains("t_seconds_bucket{le=\"+Inf\"} 6\n"), "{text}");
        assert!(
            text.contains("t_seconds_sum 0.05\nt_seconds_count 6\n"),
            "{text}"
        );
    }
}
