//! [`History`]: what the admin server saw, kept on the server so that a
//! page opened now shows the last minutes and the last day: the last
//! [`SECOND_POINTS`] seconds a point a second, the last [`MINUTE_POINTS`]
//! minutes a point a minute (each the mean of its seconds); sampled by
//! the admin server and served at `GET /api/history`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::access::{Access, Caller};
use crate::server::{AdminState, EVENTS_EVERY};
use crate::source::{CounterKind, Snapshot};

/// Points a second kept: 10 minutes.
pub const SECOND_POINTS: usize = 600;
/// Points a minute kept: a day.
pub const MINUTE_POINTS: usize = 1440;

/// The server at one moment (or the mean over a minute).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// Seconds since the Unix epoch (of the minute's start, for a minute).
    pub at: f64,
    /// Clients connected.
    pub clients: f64,
    /// CPU used by the server's process, in percent of one core.
    pub cpu_percent: f64,
    /// The process's resident memory, in bytes.
    pub memory_bytes: f64,
    /// Each counter without labels, per second (`switchboard_relay_
    /// deliveries_total` as deliveries a second, ...).
    pub rates: BTreeMap<String, f64>,
}

/// Both rings, and what the next point needs from the last sample.
#[derive(Debug, Default)]
pub struct History {
    seconds: VecDeque<Point>,
    minutes: VecDeque<Point>,
    /// The previous sample's time and counters, for the rates.
    last: Option<(f64, BTreeMap<String, f64>)>,
    /// The seconds of the minute being filled.
    minute: Vec<Point>,
}

impl History {
    /// Adds a sample of `snapshot` taken at `at` (seconds since the Unix
    /// epoch). The first sample only sets the base of the rates.
    pub fn sample(&mut self, at: f64, snapshot: &Snapshot) {
        let totals: BTreeMap<String, f64> = snapshot
            .counters
            .iter()
            .filter(|c| c.kind == CounterKind::Counter && c.labels.is_empty())
            .map(|c| (c.name.clone(), c.value))
            .collect();
        let gauge = |name: &str| {
            snapshot
                .counters
                .iter()
                .find(|c| c.name == name)
                .map_or(0.0, |c| c.value)
        };
        let Some((then, before)) = self.last.replace((at, totals.clone())) else {
            return;
        };
        let elapsed = at - then;
        if elapsed <= 0.0 {
            return;
        }
        // A counter that fell (a restarted source) gives no rate.
        let rates: BTreeMap<String, f64> = totals
            .iter()
            .filter_map(|(name, now)| {
                let was = before.get(name)?;
                (now >= was).then(|| (name.clone(), (now - was) / elapsed))
            })
            .collect();
        let cpu_percent = 100.0
            * rates
                .get("process_cpu_seconds_total")
                .copied()
                .unwrap_or(0.0);
        let point = Point {
            at,
            clients: snapshot.clients.len() as f64,
            cpu_percent,
            memory_bytes: gauge("process_resident_memory_bytes"),
            rates,
        };
        if self
            .minute
            .first()
            .is_some_and(|first| (first.at / 60.0).floor() != (at / 60.0).floor())
        {
            let minute = mean(&self.minute);
            push(&mut self.minutes, minute, MINUTE_POINTS);
            self.minute.clear();
        }
        self.minute.push(point.clone());
        push(&mut self.seconds, point, SECOND_POINTS);
    }

    /// The last ten minutes, a point a second, oldest first.
    pub fn seconds(&self) -> &VecDeque<Point> {
        &self.seconds
    }

    /// The last day, a point a minute, oldest first (the minute being
    /// filled not yet among them).
    pub fn minutes(&self) -> &VecDeque<Point> {
        &self.minutes
    }
}

fn push(ring: &mut VecDeque<Point>, point: Point, cap: usize) {
    if ring.len() == cap {
        ring.pop_front();
    }
    ring.push_back(point);
}

/// The mean of `points` (not empty), stamped with its minute's start.
fn mean(points: &[Point]) -> Point {
    let n = points.len().max(1) as f64;
    let sum = |f: fn(&Point) -> f64| points.iter().map(f).sum::<f64>() / n;
    let mut rates: BTreeMap<String, f64> = BTreeMap::new();
    for point in points {
        for (name, rate) in &point.rates {
            *rates.entry(name.clone()).or_default() += rate / n;
        }
    }
    Point {
        at: (points[0].at / 60.0).floor() * 60.0,
        clients: sum(|p| p.clients),
        cpu_percent: sum(|p| p.cpu_percent),
        memory_bytes: sum(|p| p.memory_bytes),
        rates,
    }
}

/// Samples the source a second into the history, until `stop`.
pub(crate) async fn sample(shared: Arc<AdminState>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(EVENTS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => return,
        }
        let snapshot = shared.snapshot().await;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        shared
            .history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sample(now, &snapshot);
    }
}

#[derive(Deserialize)]
pub(crate) struct HistoryQuery {
    /// `seconds` (default: the last 10 minutes) or `minutes` (the last day).
    of: Option<String>,
}

/// `GET /api/history`: `{"step_seconds": 1, "points": [...]}`, oldest first.
pub(crate) async fn route(
    State(shared): State<Arc<AdminState>>,
    caller: Caller,
    Query(query): Query<HistoryQuery>,
) -> Response {
    if let Access::Refused(response) = shared.read(&caller) {
        return response;
    }
    let history = shared.history.lock().unwrap_or_else(|e| e.into_inner());
    let (step, points) = match query.of.as_deref() {
        None | Some("seconds") => (1, history.seconds()),
        Some("minutes") => (60, history.minutes()),
        Some(other) => {
            let why = format!("no history of {other:?}: ask for seconds or minutes");
            return (StatusCode::BAD_REQUEST, Json(json!({ "error": why }))).into_response();
        }
    };
    Json(json!({ "step_seconds": step, "points": points })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{AdminClient, Counter};

    fn snapshot(clients: usize, sent: u64, cpu_seconds: f64) -> Snapshot {
        let mut cpu = Counter::total("process_cpu_seconds_total", "CPU.", 0);
        cpu.value = cpu_seconds;
        Snapshot {
            clients: (0..clients)
                .map(|i| AdminClient {
                    id: i.to_string(),
                    name: String::new(),
                    addr: None,
                    place: None,
                    kind: "player".into(),
                    traffic: None,
                })
                .collect(),
            counters: vec![
                Counter::total("sent_total", "Sent.", sent),
                Counter::total("by_reason_total", "Labelled.", 1).with_label("reason", "x"),
                cpu,
                Counter::gauge("process_resident_memory_bytes", "Memory.", 1000.0),
            ],
            places: Vec::new(),
        }
    }

    #[test]
    fn seconds_give_rates_and_cpu_as_a_percentage_of_a_core() {
        let mut history = History::default();
        history.sample(600.0, &snapshot(1, 0, 0.0));
        assert!(history.seconds().is_empty(), "the first sample is a base");
        history.sample(601.0, &snapshot(2, 50, 0.25));
        let point = &history.seconds()[0];
        assert_eq!(point.clients, 2.0);
        assert_eq!(point.rates["sent_total"], 50.0);
        assert!(!point.rates.contains_key("by_reason_total"));
        assert_eq!(point.cpu_percent, 25.0);
        assert_eq!(point.memory_bytes, 1000.0);
    }

    #[test]
    fn ten_minutes_of_seconds_and_a_day_of_minutes_are_kept_and_no_more() {
        let mut history = History::default();
        // A day and an hour, a sample a second, 10 messages a second and
        // the clients going 0, 1, 2, 0, 1, 2, ...
        let start = 1_000_020.0; // not on a minute
        let seconds = 25 * 3600;
        for s in 0..=seconds {
            let at = start + s as f64;
            history.sample(at, &snapshot(s % 3, 10 * s as u64, 0.0));
        }
        assert_eq!(history.seconds().len(), SECOND_POINTS);
        assert_eq!(history.minutes().len(), MINUTE_POINTS);
        let last = history.seconds().back().unwrap();
        assert_eq!(last.at, start + seconds as f64);
        let minute = &history.minutes()[MINUTE_POINTS / 2];
        assert_eq!(minute.at % 60.0, 0.0);
        assert!((minute.rates["sent_total"] - 10.0).abs() < 1e-9);
        assert!((minute.clients - 1.0).abs() < 1e-9, "{}", minute.clients);
        // Oldest first, a minute apart.
        let m = history.minutes();
        assert!(m
            .iter()
            .zip(m.iter().skip(1))
            .all(|(a, b)| b.at - a.at == 60.0));
    }

    #[test]
    fn a_counter_that_falls_gives_no_rate_that_moment() {
        let mut history = History::default();
        history.sample(0.0, &snapshot(0, 100, 0.0));
        history.sample(1.0, &snapshot(0, 5, 0.0));
        assert!(!history.seconds()[0].rates.contains_key("sent_total"));
        history.sample(2.0, &snapshot(0, 15, 0.0));
        assert_eq!(history.seconds()[1].rates["sent_total"], 10.0);
    }
}
