//! The Prometheus text exposition format (version 0.0.4) of a [`Snapshot`].

use std::fmt::Write;

use crate::source::{CounterKind, Snapshot};

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
        if emitted.contains(&counter.name.as_str()) {
            continue;
        }
        emitted.push(&counter.name);
        let kind = match counter.kind {
            CounterKind::Counter => "counter",
            CounterKind::Gauge => "gauge",
        };
        let _ = writeln!(out, "# HELP {} {}", counter.name, counter.help);
        let _ = writeln!(out, "# TYPE {} {kind}", counter.name);
        for same in snapshot.counters.iter().filter(|c| c.name == counter.name) {
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
    use crate::source::Counter;

    #[test]
    fn counters_are_grouped_by_name_with_escaped_labels() {
        let snapshot = Snapshot {
            clients: Vec::new(),
            counters: vec![
                Counter::total("x_total", "Things.", 3).with_label("reason", "slow"),
                Counter::gauge("y", "Now.", 1.5),
                Counter::total("x_total", "Things.", 4).with_label("reason", "a \"b\"\n"),
            ],
        };
        let text = render("relay", 2.0, &snapshot);
        assert_eq!(text.matches("# TYPE x_total counter").count(), 1);
        assert!(text.contains("x_total{reason=\"slow\"} 3\n"));
        assert!(text.contains("x_total{reason=\"a \\\"b\\\"\\n\"} 4\n"));
        assert!(text.contains("# TYPE y gauge\ny 1.5\n"));
        assert!(text.contains("switchboard_up{mode=\"relay\"} 1\n"));
    }
}
