//! [`ManagerAdmin`]: a running `ServerManager` as an [`AdminSource`]:
//! its clients with their traffic, its counters, the operator's kick.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::manager::{LogLevel, ManagerHandle};
use crate::session::ClientId;
use tokio::sync::broadcast::error::RecvError;

use crate::admin::source::{
    AdminClient, AdminPlace, AdminSource, BoxFuture, Counter, LogLine, Snapshot, Traffic,
};

/// Log lines a [`ManagerAdmin`] keeps.
pub const LOG_LINES: usize = 500;

/// A server manager (any `GameLogic`) seen by its admin server.
#[derive(Debug, Clone)]
pub struct ManagerAdmin {
    mode: &'static str,
    handle: ManagerHandle,
    log: Arc<Mutex<VecDeque<LogLine>>>,
    /// Where recordings started from the admin page go.
    recordings: Option<PathBuf>,
}

impl ManagerAdmin {
    /// The manager behind `handle`, shown as `mode` (`board`, the game's
    /// name). Its log's latest [`LOG_LINES`] lines are kept from now on, by
    /// a task on the current tokio runtime.
    pub fn new(mode: &'static str, handle: ManagerHandle) -> Self {
        let log = Arc::new(Mutex::new(VecDeque::with_capacity(LOG_LINES)));
        let (mut lines, kept, started) = (handle.log(), log.clone(), Instant::now());
        tokio::spawn(async move {
            loop {
                let (level, text) = match lines.recv().await {
                    Ok(entry) => {
                        let level = match entry.level {
                            LogLevel::Info => "info",
                            LogLevel::Warn => "warn",
                        };
                        (level, entry.text)
                    }
                    Err(RecvError::Lagged(n)) => ("warn", format!("({n} log lines missed)")),
                    Err(RecvError::Closed) => break,
                };
                let line = LogLine {
                    at_seconds: started.elapsed().as_secs_f64(),
                    level,
                    text,
                };
                let mut kept = kept.lock().expect("log lock");
                if kept.len() == LOG_LINES {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
        });
        Self {
            mode,
            handle,
            log,
            recordings: None,
        }
    }

    /// Recordings started from the admin page go into `dir` (created when
    /// the first starts), each named after the mode and the time. Without
    /// it the page's start button says there is nowhere to write.
    pub fn with_recordings(mut self, dir: impl Into<PathBuf>) -> Self {
        self.recordings = Some(dir.into());
        self
    }
}

impl AdminSource for ManagerAdmin {
    fn mode(&self) -> &'static str {
        self.mode
    }

    fn recording(&self) -> Option<crate::manager::RecordingStatus> {
        self.handle.recording()
    }

    fn stop_recording(&self) -> bool {
        self.handle.stop_recording()
    }

    fn start_recording(&self) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(crate::admin::start_recording_in(
            self.recordings.as_deref(),
            self.mode,
            |path| {
                self.handle
                    .start_recording(crate::manager::RecordConfig::to(path))
            },
        ))
    }

    fn snapshot(&self) -> BoxFuture<'_, Snapshot> {
        Box::pin(async move {
            let Some(stats) = self.handle.stats().await else {
                return Snapshot::default();
            };
            let place_of = |id: &ClientId| {
                stats
                    .places
                    .iter()
                    .find(|p| p.members.contains(id))
                    .map(|p| p.name.clone())
            };
            let clients = stats
                .clients
                .iter()
                .map(|c| AdminClient {
                    id: c.id.to_string(),
                    name: c.name.clone(),
                    addr: Some(c.addr.to_string()),
                    place: place_of(&c.id),
                    kind: "player".into(),
                    traffic: Some(Traffic {
                        connected_seconds: Some(c.connected_for.as_secs_f64()),
                        idle_seconds: Some(c.idle_for.as_secs_f64()),
                        rtt_ms: Some(c.rtt_micros as f64 / 1000.0),
                        messages_in: Some(c.messages_in),
                        bytes_in: Some(c.bytes_in),
                        messages_out: Some(c.messages_out),
                        bytes_out: Some(c.bytes_out),
                    }),
                })
                .collect::<Vec<_>>();
            let mut counters = vec![
                Counter::gauge(
                    "switchboard_manager_clients",
                    "Clients connected now.",
                    clients.len() as f64,
                ),
                Counter::gauge(
                    "switchboard_manager_sessions",
                    "Sessions now, those in their grace period included.",
                    stats.sessions as f64,
                ),
                Counter::total(
                    "switchboard_manager_connections_total",
                    "Connections accepted.",
                    stats.connections_total,
                ),
                Counter::total(
                    "switchboard_manager_joins_total",
                    "New sessions.",
                    stats.joins_total,
                ),
                Counter::total(
                    "switchboard_manager_resumes_total",
                    "Sessions resumed after a reconnect.",
                    stats.resumes_total,
                ),
                Counter::total(
                    "switchboard_manager_refused_total",
                    "Hellos refused.",
                    stats.refused_total,
                ),
                Counter::total(
                    "switchboard_manager_evicted_total",
                    "Offline sessions that gave way to a newcomer.",
                    stats.evicted_total,
                ),
                Counter::total(
                    "switchboard_manager_rate_limited_total",
                    "Messages dropped over a client's rate.",
                    stats.rate_limited_total,
                ),
                Counter::total(
                    "switchboard_manager_logs_skipped_total",
                    "Log lines about peers skipped by the per-address limit.",
                    stats.logs_skipped_total,
                ),
            ];
            counters.extend(super::endpoint_counters(&self.handle.endpoint()));
            let t = &stats.traffic;
            counters.extend([
                Counter::total(
                    "switchboard_manager_received_frames_total",
                    "Frames received from clients, system frames included.",
                    t.frames_in,
                ),
                Counter::total(
                    "switchboard_manager_received_bytes_total",
                    "Bytes received from clients on the wire.",
                    t.bytes_in,
                ),
                Counter::total(
                    "switchboard_manager_sent_frames_total",
                    "Frames sent to clients, system frames included.",
                    t.frames_out,
                ),
                Counter::total(
                    "switchboard_manager_sent_bytes_total",
                    "Bytes sent to clients on the wire.",
                    t.bytes_out,
                ),
            ]);
            // The reasons are the kinds of `DisconnectReason`: a bounded set.
            for (reason, count) in &stats.disconnects {
                counters.push(
                    Counter::total(
                        "switchboard_manager_disconnects_total",
                        "Connections ended, by reason.",
                        *count,
                    )
                    .with_label("reason", reason),
                );
            }
            counters.extend(request_counters(&stats));
            let places = stats
                .places
                .iter()
                .map(|p| AdminPlace {
                    name: p.name.clone(),
                    members: p.members.iter().map(|m| m.to_string()).collect(),
                    facts: p.facts.clone(),
                })
                .collect();
            Snapshot {
                clients,
                counters,
                places,
            }
        })
    }

    fn log(&self) -> Vec<LogLine> {
        self.log.lock().expect("log lock").iter().cloned().collect()
    }

    fn kick(&self, id: String, reason: String) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            match id.parse() {
                Ok(uuid) => self.handle.kick(ClientId(uuid), &reason).await,
                Err(_) => false,
            }
        })
    }
}

/// Requests by verdict and channel, error replies by code, and the
/// histogram of request handling times.
fn request_counters(stats: &crate::ServerStats) -> Vec<Counter> {
    let channel = |c: &u16| match *c {
        crate::manager::OTHER_CHANNEL => "other".to_string(),
        c => c.to_string(),
    };
    let mut counters = Vec::new();
    for (verdict, by_channel) in [
        ("accepted", &stats.accepted_by_channel),
        ("rejected", &stats.rejected_by_channel),
    ] {
        for (c, count) in by_channel {
            counters.push(
                Counter::total(
                    "switchboard_manager_requests_total",
                    "Requests, by verdict and channel.",
                    *count,
                )
                .with_label("verdict", verdict)
                .with_label("channel", &channel(c)),
            );
        }
    }
    for (code, count) in &stats.errors_by_code {
        counters.push(
            Counter::total(
                "switchboard_manager_errors_total",
                "Messages answered with an error, by code.",
                *count,
            )
            .with_label("code", code),
        );
    }
    let times = &stats.request_time;
    counters.extend(Counter::histogram_micros(
        "switchboard_manager_request_duration_seconds",
        "Time the server took to validate and apply a request, in seconds.",
        &crate::manager::REQUEST_TIME_BOUNDS_MICROS,
        times,
    ));
    counters
}
