//! The driver's side of what outlives the process: shared sessions (claims
//! asked concurrently, writes applied in order by one task, answers fed back
//! to the core as events) and checkpoints (the latest one saved, older ones
//! skipped while a save is under way).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::shared::{CheckpointStore, SessionShare, ShareUpdate};
use super::ManagerConfig;
use super::ManagerEvent;
use super::{Control, LogEntry, LogLevel};
use crate::session::{ClientId, Outage, ReconnectToken};
use crate::socket::PeerId;

/// Writes waiting for the store at most; past it one is dropped and logged
/// (the store has been down or slow for that long).
const MAX_QUEUED_WRITES: usize = 65_536;

/// Writes applied in one call at most.
const WRITE_BATCH: usize = 256;

/// The stores the config names, started.
#[derive(Default)]
pub(super) struct Stores {
    pub(super) sessions: Option<SharedDriver>,
    pub(super) checkpoints: Option<CheckpointWriter>,
}

impl Stores {
    /// Starts what `config` asks for on the current runtime.
    pub(super) fn start(config: &ManagerConfig, control: &Control) -> Self {
        let grace = config.rules.sessions.grace_period;
        Self {
            sessions: config
                .shared_sessions
                .as_ref()
                .map(|hook| SharedDriver::start(hook.0.clone(), grace, control)),
            checkpoints: config
                .checkpoints
                .as_ref()
                .map(|hook| CheckpointWriter::start(hook.0.clone(), control)),
        }
    }

    /// The shared store's next answer; never, without one.
    pub(super) async fn next_answer(&mut self) -> Option<ManagerEvent> {
        match &mut self.sessions {
            Some(shared) => shared.next_answer().await,
            None => std::future::pending().await,
        }
    }
}

/// Saves the latest checkpoint; one queued while a save runs replaces any
/// older one still waiting.
pub(super) struct CheckpointWriter {
    latest: tokio::sync::watch::Sender<Option<Vec<u8>>>,
}

impl CheckpointWriter {
    fn start(store: std::sync::Arc<dyn CheckpointStore>, control: &Control) -> Self {
        let (latest, mut rx) = tokio::sync::watch::channel(None::<Vec<u8>>);
        let log = control.log.clone();
        tokio::spawn(async move {
            let mut outage = Outage::new("checkpoint store");
            while rx.changed().await.is_ok() {
                let Some(state) = rx.borrow_and_update().clone() else {
                    continue;
                };
                let len = state.len();
                match store.save(state).await {
                    Ok(()) => {
                        tracing::debug!(len, "checkpoint saved");
                        if let Some(failed) = outage.succeeded() {
                            let text =
                                format!("checkpoint store reachable again ({failed} saves failed)");
                            to_log(&log, LogLevel::Info, text);
                        }
                    }
                    Err(err) => {
                        if outage.failed(&err) {
                            let text = format!("checkpoint of {len} bytes not saved: {err}");
                            to_log(&log, LogLevel::Warn, text);
                        }
                    }
                }
            }
        });
        Self { latest }
    }

    pub(super) fn save(&self, state: Vec<u8>) {
        self.latest.send_replace(Some(state));
    }
}

pub(super) struct SharedDriver {
    share: Arc<dyn SessionShare>,
    grace: Duration,
    writes: mpsc::Sender<ShareUpdate>,
    answers_tx: mpsc::UnboundedSender<ManagerEvent>,
    answers: mpsc::UnboundedReceiver<ManagerEvent>,
    /// The store's restarts, when it reports them.
    restarts: Option<tokio::sync::watch::Receiver<u64>>,
}

impl SharedDriver {
    /// Starts the writer task on the current runtime.
    fn start(share: Arc<dyn SessionShare>, grace: Duration, control: &Control) -> Self {
        let (writes, writes_rx) = mpsc::channel(MAX_QUEUED_WRITES);
        let (answers_tx, answers) = mpsc::unbounded_channel();
        let writer = share.clone();
        let log = control.log.clone();
        let moved = answers_tx.clone();
        tokio::spawn(write_in_order(writer, grace, writes_rx, moved, log));
        let restarts = share.restarts();
        Self {
            share,
            grace,
            writes,
            answers_tx,
            answers,
            restarts,
        }
    }

    /// Asks the store for `client`; the answer arrives through
    /// [`next_answer`](Self::next_answer). The core bounds how many run.
    pub(super) fn claim(
        &self,
        peer: PeerId,
        client: ClientId,
        token: ReconnectToken,
        new_token: ReconnectToken,
    ) {
        let share = self.share.clone();
        let grace = self.grace;
        let answers = self.answers_tx.clone();
        tokio::spawn(async move {
            let result = share.claim(client, &token, &new_token, grace).await;
            let _ = answers.send(ManagerEvent::Claimed {
                peer,
                client,
                new_token,
                result,
            });
        });
    }

    /// Queues a write, after those before it.
    pub(super) fn write(&self, update: ShareUpdate, control: &Control) {
        if self.writes.try_send(update).is_err() {
            let text = "the shared session store is backed up; a session change was not written";
            warn(&control.log, text.into());
        }
    }

    /// The store's next answer, or word that it restarted.
    pub(super) async fn next_answer(&mut self) -> Option<ManagerEvent> {
        let restarted = async {
            match &mut self.restarts {
                Some(restarts) => match restarts.changed().await {
                    Ok(()) => Some(()),
                    // The store stopped reporting: never again.
                    Err(_) => std::future::pending().await,
                },
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            answer = self.answers.recv() => answer,
            Some(()) = restarted => Some(ManagerEvent::StoreRestored),
        }
    }
}

/// Applies the writes in order, those queued together in one call.
async fn write_in_order(
    share: Arc<dyn SessionShare>,
    grace: Duration,
    mut writes: mpsc::Receiver<ShareUpdate>,
    answers: mpsc::UnboundedSender<ManagerEvent>,
    log: tokio::sync::broadcast::Sender<LogEntry>,
) {
    let mut batch = Vec::with_capacity(WRITE_BATCH);
    let mut outage = Outage::new("shared session store");
    while writes.recv_many(&mut batch, WRITE_BATCH).await > 0 {
        let count = batch.len();
        match share.apply(std::mem::take(&mut batch), grace).await {
            Ok(moved) => {
                if let Some(failed) = outage.succeeded() {
                    let text =
                        format!("shared session store reachable again ({failed} writes failed)");
                    to_log(&log, LogLevel::Info, text);
                }
                if !moved.is_empty() {
                    let _ = answers.send(ManagerEvent::MovedAway { clients: moved });
                }
            }
            Err(err) => {
                if outage.failed(&err) {
                    let text =
                        format!("{count} session changes not written to the shared store: {err}");
                    to_log(&log, LogLevel::Warn, text);
                }
            }
        }
    }
}

/// A line for the manager's own log (the admin page); `tracing` has it
/// already, once per outage.
fn to_log(log: &tokio::sync::broadcast::Sender<LogEntry>, level: LogLevel, text: String) {
    let _ = log.send(LogEntry { level, text });
}

/// A warning in both logs.
fn warn(log: &tokio::sync::broadcast::Sender<LogEntry>, text: String) {
    tracing::warn!("{text}");
    to_log(log, LogLevel::Warn, text);
}
