//! What a server mode reports to its admin server, and what it lets the
//! operator do.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

/// A future an [`AdminSource`] returns (its modes answer from their own
/// tasks).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One server mode, as its admin server sees it.
pub trait AdminSource: Send + Sync + 'static {
    /// The mode's name: `relay`, `board`, `master`, `rooms`.
    fn mode(&self) -> &'static str;

    /// Everything the overview, the clients table and `/metrics` show, now.
    fn snapshot(&self) -> BoxFuture<'_, Snapshot>;

    /// Disconnects client `id`, telling it `reason`; `false` if there is no
    /// such client.
    fn kick(&self, id: String, reason: String) -> BoxFuture<'_, bool>;

    /// Sends every client the operator's notice; how many it reached. A
    /// mode without notices says why not.
    fn notice(&self, text: String) -> BoxFuture<'_, Result<usize, String>> {
        let _ = text;
        let mode = self.mode();
        Box::pin(async move { Err(format!("the {mode} has no notices")) })
    }

    /// Starts `count` bots running `script` (a name the mode knows) in
    /// `place` (a zone, a room); how many started. A mode without bots
    /// says why not.
    fn spawn_bots(
        &self,
        count: usize,
        script: String,
        place: Option<String>,
    ) -> BoxFuture<'_, Result<usize, String>> {
        let _ = (count, script, place);
        let mode = self.mode();
        Box::pin(async move { Err(format!("the {mode} has no bots")) })
    }

    /// Stops every bot the admin server started; how many.
    fn remove_bots(&self) -> BoxFuture<'_, usize> {
        Box::pin(async { 0 })
    }

    /// The latest lines of the mode's log, oldest first (empty for a mode
    /// that keeps none).
    fn log(&self) -> Vec<LogLine> {
        Vec::new()
    }

    /// Where the mode's recording of its session stands (`None`: it
    /// records nothing).
    fn recording(&self) -> Option<crate::manager::RecordingStatus> {
        None
    }

    /// Stops the recording; `false` if nothing was being recorded.
    fn stop_recording(&self) -> bool {
        false
    }

    /// Starts recording the session now, into a new file of the mode's
    /// choosing (never the operator's: the admin API names no path); its
    /// name. A mode that records only from its start says so.
    fn start_recording(&self) -> BoxFuture<'_, Result<String, String>> {
        let mode = self.mode();
        Box::pin(async move {
            Err(format!(
                "the {mode} records from its start only (--record FILE)"
            ))
        })
    }
}

/// One line of a mode's log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogLine {
    /// Seconds since the admin view started.
    pub at_seconds: f64,
    /// `info` or `warn`.
    pub level: &'static str,
    /// The text (peer-chosen strings in it are escaped by the server).
    pub text: String,
}

/// What a mode reports at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Snapshot {
    /// The connected clients.
    pub clients: Vec<AdminClient>,
    /// Its counters and gauges (for `/metrics` and the overview).
    pub counters: Vec<Counter>,
    /// Where the clients are (rooms, tables), when the mode says; see
    /// [`Snapshot::places_or_groups`].
    pub places: Vec<AdminPlace>,
}

impl Snapshot {
    /// The places the mode reported, or else its clients grouped by their
    /// `place` (a relay's zones: players per zone); each with its traffic,
    /// the sums of its members' counts (those the mode keeps).
    pub fn places_or_groups(&self) -> Vec<AdminPlace> {
        let mut places = if self.places.is_empty() {
            let mut groups: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
            for client in &self.clients {
                if let Some(place) = &client.place {
                    groups.entry(place).or_default().push(client.id.clone());
                }
            }
            groups
                .into_iter()
                .map(|(name, members)| AdminPlace {
                    name: name.to_string(),
                    facts: vec![("players".into(), members.len().to_string())],
                    members,
                })
                .collect()
        } else {
            self.places.clone()
        };
        let traffic: std::collections::HashMap<&str, &Traffic> = self
            .clients
            .iter()
            .filter_map(|c| Some((c.id.as_str(), c.traffic.as_ref()?)))
            .collect();
        for place in &mut places {
            let mut sums: [(&str, Option<u64>); 4] = Traffic::default().counts();
            for member in place.members.iter().filter_map(|m| traffic.get(m.as_str())) {
                for (sum, (_, count)) in sums.iter_mut().zip(member.counts()) {
                    if let Some(count) = count {
                        sum.1 = Some(sum.1.unwrap_or(0) + count);
                    }
                }
            }
            for (label, sum) in sums {
                if let Some(sum) = sum {
                    place.facts.push((label.to_string(), sum.to_string()));
                }
            }
        }
        places
    }
}

/// A place clients are in (a room, a zone), as the places table shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AdminPlace {
    /// Its name.
    pub name: String,
    /// The ids (as in the clients table) of the clients in it.
    pub members: Vec<String>,
    /// Facts as label and value, in display order.
    pub facts: Vec<(String, String)>,
}

/// One client, as the clients table shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AdminClient {
    /// Its id in this mode (a player number, a session id).
    pub id: String,
    /// The name it gave.
    pub name: String,
    /// Where it connects from, if known.
    pub addr: Option<String>,
    /// Where it is: a zone, a room, a seat.
    pub place: Option<String>,
    /// What it is: `native`, `json`, `bot`, `player`, ...
    pub kind: String,
    /// Its traffic and timing, where the mode keeps them.
    #[serde(flatten)]
    pub traffic: Option<Traffic>,
}

/// A client's traffic and timing: each figure where the mode keeps it
/// (left out of the JSON, and its column off the page, where not).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Traffic {
    /// Seconds since it connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connected_seconds: Option<f64>,
    /// Seconds since it last sent anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<f64>,
    /// The last measured round trip, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    /// Messages received from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages_in: Option<u64>,
    /// Bytes received from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_in: Option<u64>,
    /// Messages sent to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages_out: Option<u64>,
    /// Bytes sent to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_out: Option<u64>,
}

impl Traffic {
    /// The message and byte counts as (label, value) facts, those the mode
    /// keeps: what a place's members sum to.
    fn counts(&self) -> [(&'static str, Option<u64>); 4] {
        [
            ("messages in", self.messages_in),
            ("messages out", self.messages_out),
            ("bytes in", self.bytes_in),
            ("bytes out", self.bytes_out),
        ]
    }
}

/// Whether a [`Counter`] only grows or goes up and down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CounterKind {
    /// Only grows (its name ends in `_total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// One series of a histogram (`<name>_bucket` with `le`, `<name>_sum`,
    /// `<name>_count`); see [`Counter::histogram`].
    Histogram,
}

/// One number a mode reports, named by Prometheus conventions (base units,
/// `_total` for counters), with labels of bounded cardinality (a reason, a
/// channel, a mode; never a client id).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Counter {
    /// The metric's name.
    pub name: String,
    /// One line of help.
    pub help: String,
    /// Counter or gauge.
    pub kind: CounterKind,
    /// Label pairs.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Counter {
    /// A counter without labels.
    pub fn total(name: &str, help: &str, value: u64) -> Self {
        Self {
            name: name.into(),
            help: help.into(),
            kind: CounterKind::Counter,
            labels: Vec::new(),
            value: value as f64,
        }
    }

    /// A gauge without labels.
    pub fn gauge(name: &str, help: &str, value: f64) -> Self {
        Self {
            name: name.into(),
            help: help.into(),
            kind: CounterKind::Gauge,
            labels: Vec::new(),
            value,
        }
    }

    /// The same with a label added.
    pub fn with_label(mut self, key: &str, value: &str) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }

    /// The series of a histogram called `name`: from `buckets` (upper
    /// bound, and how many observations fell at or under it and above the
    /// bound before it), the cumulative `_bucket` series with `le`
    /// (ending with `+Inf`), `_sum` and `_count`.
    pub fn histogram(
        name: &str,
        help: &str,
        buckets: &[(f64, u64)],
        over: u64,
        sum: f64,
    ) -> Vec<Self> {
        let series = |suffix: &str, value: f64| Self {
            name: format!("{name}{suffix}"),
            help: help.into(),
            kind: CounterKind::Histogram,
            labels: Vec::new(),
            value,
        };
        let mut out = Vec::with_capacity(buckets.len() + 3);
        let mut cumulative = 0;
        for (bound, count) in buckets {
            cumulative += count;
            out.push(series("_bucket", cumulative as f64).with_label("le", &bound.to_string()));
        }
        cumulative += over;
        out.push(series("_bucket", cumulative as f64).with_label("le", "+Inf"));
        out.push(series("_sum", sum));
        out.push(series("_count", cumulative as f64));
        out
    }

    /// The series of a histogram called `name` from `times`
    /// ([`Histogram`](crate::histogram::Histogram)) cut at `bounds_micros`
    /// (ascending), shown in seconds.
    pub fn histogram_micros(
        name: &str,
        help: &str,
        bounds_micros: &[u64],
        times: &crate::histogram::Histogram,
    ) -> Vec<Self> {
        let counts = times.counts_at(bounds_micros);
        let buckets: Vec<(f64, u64)> = bounds_micros
            .iter()
            .zip(&counts)
            .map(|(bound, count)| (*bound as f64 / 1e6, *count))
            .collect();
        let over = counts[bounds_micros.len()];
        let sum = times.sum_micros() as f64 / 1e6;
        Self::histogram(name, help, &buckets, over, sum)
    }

    /// The metric family this series belongs to (a histogram's series
    /// share their name without the suffix).
    pub fn family(&self) -> &str {
        match self.kind {
            CounterKind::Histogram => ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| self.name.strip_suffix(suffix))
                .unwrap_or(&self.name),
            _ => &self.name,
        }
    }
}
