//! The Prometheus text exposition format (version 0.0.4) of a [`Snapshot`].

use std::fmt::Write;

use crate::source::{Counter, CounterKind, Snapshot};

/// `snapshot`'s counters as Prometheus text, after `switchboard_up` and
/// `switchboard_build_info` labelled with the mode (and the version).
/// Metrics of one name are grouped under one `# HELP` and `# TYPE`.
pub fn render(mode: &str, snapshot: &Snapshot) -> String {
    let mut out = String::new();
    let mut emitted: Vec<&str> = Vec::new();
    let mode = escape(mode);
    let _ = writeln!(
        out,
        "# HELP switchboard_up Whether the server is serving (1).\n\
         # TYPE switchboard_up gauge\n\
         switchboard_up{{mode=\"{mode}\"}} 1\n\
         # HELP switchboard_build_info The serving build: its version, and the mode it runs (1).\n\
         # TYPE switchboard_build_info gauge\n\
         switchboard_build_info{{mode=\"{mode}\",version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
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

/// The serving process's own metrics, by Prometheus' standard names
/// (read from `/proc` on Linux; nothing elsewhere):
/// `process_cpu_seconds_total`, `process_start_time_seconds`,
/// `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
/// `process_open_fds` and `process_max_fds`.
pub fn process_counters() -> Vec<Counter> {
    let mut counters = Vec::new();
    let ticks_per_second = 100.0; // USER_HZ, 100 on every Linux
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let stat = read("/proc/self/stat");
    // The fields after the command's closing parenthesis, from field 3.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    let gauge = |name: &str, help: &str, value: f64| Counter::gauge(name, help, value);
    if let (Some(user), Some(system)) = (field(14), field(15)) {
        let mut cpu = Counter::total(
            "process_cpu_seconds_total",
            "User and system CPU time of the server's process, in seconds.",
            0,
        );
        cpu.value = (user + system) / ticks_per_second;
        counters.push(cpu);
    }
    let boot = read("/proc/stat")
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    if let (Some(boot), Some(start)) = (boot, field(22)) {
        counters.push(gauge(
            "process_start_time_seconds",
            "When the server's process started, in seconds since the Unix epoch.",
            boot + start / ticks_per_second,
        ));
    }
    if let Some(bytes) = field(23) {
        counters.push(gauge(
            "process_virtual_memory_bytes",
            "Virtual memory of the server's process, in bytes.",
            bytes,
        ));
    }
    let rss_kib = read("/proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok());
    if let Some(kib) = rss_kib {
        counters.push(gauge(
            "process_resident_memory_bytes",
            "Resident memory of the server's process, in bytes.",
            kib * 1024.0,
        ));
    }
    if let Ok(open) = std::fs::read_dir("/proc/self/fd") {
        counters.push(gauge(
            "process_open_fds",
            "File descriptors the server's process has open.",
            open.count() as f64,
        ));
    }
    let max_fds = read("/proc/self/limits")
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok());
    if let Some(max) = max_fds {
        counters.push(gauge(
            "process_max_fds",
            "The server's process's limit of open file descriptors.",
            max,
        ));
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
        let text = render("relay", &snapshot);
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
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started in the last hour (this test's own process).
        assert!(
            value("process_start_time_seconds").is_some_and(|v| v <= now + 1.0 && v > now - 3600.0)
        );
        assert!(value("process_open_fds").is_some_and(|v| v >= 3.0));
        assert!(value("process_max_fds").is_some_and(|v| v >= value("process_open_fds").unwrap()));
        assert!(value("process_virtual_memory_bytes").is_some_and(|v| v > 1e6));
    }

    #[test]
    fn a_histogram_is_one_family_with_cumulative_buckets() {
        let snapshot = Snapshot {
            counters: Counter::histogram("t_seconds", "Times.", &[(0.001, 2), (0.01, 3)], 1, 0.05),
            ..Snapshot::default()
        };
        let text = render("rooms", &snapshot);
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
