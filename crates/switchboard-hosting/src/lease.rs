//! Keeping a port mapped while a game is hosted.
//!
//! ```text
//!  start ──> map_port ──ok──> Mapped ──(half the lease)──> renew ──ok──┐
//!               │  ^                                        │           │
//!             fail  └──────────── renewal refused ──────────┘  <────────┘
//!               v
//!            Failed ──(PortMapConfig::retry)──> map_port again
//!
//!  stop, or the handle dropped, at any point ──> remove the mapping ──> Stopped
//! ```
//!
//! A [`PortLease`] runs this as a task on the caller's tokio runtime
//! ([`PortLease::start`]) or on a thread of its own
//! ([`PortLease::start_thread`]: for a game loop without tokio, or a
//! server whose runtime ends before the mapping must be removed). Either
//! way it is the same handle.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use crate::portmap::{map_port, MapError, Mapping, Method, PortMapConfig};

/// Where a hosted port stands, for the lobby or the log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MapStatus {
    /// Asking the gateways (the first time only).
    Trying,
    /// The gateway forwards the port.
    Mapped {
        /// The method that worked.
        method: Method,
        /// Where players on the internet connect.
        external: SocketAddr,
        /// "reachable at 203.0.113.7:7100 through UPnP", with a warning
        /// when that address is not a public one.
        text: String,
    },
    /// No method worked; they are tried again after [`PortMapConfig::retry`].
    Failed(MapError),
    /// Stopped: what became of the mapping.
    Stopped(String),
}

impl MapStatus {
    /// Where players on the internet connect, when the port is mapped.
    pub fn external(&self) -> Option<SocketAddr> {
        match self {
            MapStatus::Mapped { external, .. } => Some(*external),
            _ => None,
        }
    }
}

impl std::fmt::Display for MapStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MapStatus::Trying => f.write_str("asking the router to forward the port"),
            MapStatus::Mapped { text, .. } => f.write_str(text),
            MapStatus::Failed(error) => write!(
                f,
                "not reachable from the internet: {error} (forward the port by hand, or host through a relay)"
            ),
            MapStatus::Stopped(what) => f.write_str(what),
        }
    }
}

/// Where the lease's keeper runs.
#[derive(Debug)]
enum Keeper {
    /// A task on the tokio runtime that started it.
    Task(tokio::task::JoinHandle<()>),
    /// A thread of its own, with a runtime of its own.
    Thread(std::thread::JoinHandle<()>),
    /// Its thread could not be started (the status says so).
    None,
}

/// A port kept mapped: mapped, renewed before its lease runs out, mapped
/// again when a renewal is refused, and removed when the lease is stopped
/// or dropped (waiting at most [`PortMapConfig::timeout`] for the gateway).
#[derive(Debug)]
pub struct PortLease {
    status: watch::Receiver<MapStatus>,
    /// Dropped: the keeper removes the mapping and ends.
    stop: Option<oneshot::Sender<()>>,
    keeper: Keeper,
}

impl PortLease {
    /// Starts mapping the TCP port `local_port` of this machine, as a task
    /// on the current tokio runtime (must be called within one). Dropping
    /// the lease stops it; the removal then runs on as long as the runtime
    /// does.
    pub fn start(config: PortMapConfig, local_port: u16) -> Self {
        Self::start_with(config, local_port, |_| {})
    }

    /// [`PortLease::start`], with `on_change` called on the lease's task
    /// at every change of status (to log or show it).
    pub fn start_with(
        config: PortMapConfig,
        local_port: u16,
        on_change: impl FnMut(&MapStatus) + Send + 'static,
    ) -> Self {
        let (mut lease, report, stopped) = Self::new(on_change);
        lease.keeper = Keeper::Task(tokio::spawn(keep(config, local_port, report, stopped)));
        lease
    }

    /// Starts mapping the TCP port `local_port` of this machine on a thread
    /// of its own: for a game without tokio, and for a server that must
    /// remove its mapping after its runtime has stopped. Dropping the lease
    /// removes the mapping before the drop returns.
    pub fn start_thread(config: PortMapConfig, local_port: u16) -> Self {
        Self::start_thread_with(config, local_port, |_| {})
    }

    /// [`PortLease::start_thread`], with `on_change` called on the lease's
    /// thread at every change of status (to log or show it).
    pub fn start_thread_with(
        config: PortMapConfig,
        local_port: u16,
        on_change: impl FnMut(&MapStatus) + Send + 'static,
    ) -> Self {
        let (mut lease, mut report, stopped) = Self::new(on_change);
        let thread = std::thread::Builder::new()
            .name("switchboard-portmap".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match runtime {
                    Ok(runtime) => runtime.block_on(keep(config, local_port, report, stopped)),
                    Err(e) => report.set(MapStatus::Stopped(format!(
                        "port mapping not started: no runtime ({e})"
                    ))),
                }
            });
        lease.keeper = match thread {
            Ok(thread) => Keeper::Thread(thread),
            Err(e) => {
                tracing::error!(%e, "port mapping thread not started");
                Keeper::None
            }
        };
        lease
    }

    /// A lease not yet kept, and what its keeper reports to and stops on.
    fn new(
        on_change: impl FnMut(&MapStatus) + Send + 'static,
    ) -> (Self, Report, oneshot::Receiver<()>) {
        let (status_tx, status) = watch::channel(MapStatus::Trying);
        let (stop, stopped) = oneshot::channel();
        let lease = Self {
            status,
            stop: Some(stop),
            keeper: Keeper::None,
        };
        (lease, Report::new(status_tx, on_change), stopped)
    }

    /// The status now.
    pub fn status(&self) -> MapStatus {
        self.status.borrow().clone()
    }

    /// Every change of status, as a `watch` receiver (to show it as it
    /// changes).
    pub fn watch(&self) -> watch::Receiver<MapStatus> {
        self.status.clone()
    }

    /// Waits for the first answer: mapped, or why not.
    pub async fn ready(&mut self) -> MapStatus {
        // An error: the keeper is gone, and its last word is the status.
        let _ = self
            .status
            .wait_for(|status| *status != MapStatus::Trying)
            .await;
        self.status()
    }

    /// Blocks until the first answer (mapped, or why not), or `timeout`:
    /// for a game loop without tokio.
    pub fn wait_ready(&self, timeout: Duration) -> MapStatus {
        let until = Instant::now() + timeout;
        loop {
            let status = self.status();
            if status != MapStatus::Trying || Instant::now() >= until {
                return status;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Removes the mapping (bounded by [`PortMapConfig::timeout`]) and
    /// says what became of it.
    pub async fn stop(mut self) -> MapStatus {
        drop(self.stop.take());
        match std::mem::replace(&mut self.keeper, Keeper::None) {
            Keeper::Task(task) => {
                let _ = task.await;
            }
            Keeper::Thread(thread) => {
                let _ = self
                    .status
                    .wait_for(|status| matches!(status, MapStatus::Stopped(_)))
                    .await;
                let _ = tokio::task::spawn_blocking(move || thread.join()).await;
            }
            Keeper::None => {}
        }
        self.status()
    }

    /// Removes the mapping and says what became of it, blocking: for a
    /// lease on its own thread ([`PortLease::start_thread`]). A lease on a
    /// runtime's task is only told to stop (its removal runs on that
    /// runtime): stop it with [`stop`](Self::stop) to wait for it.
    pub fn stop_blocking(mut self) -> MapStatus {
        self.finish();
        self.status()
    }

    /// Tells the keeper to stop, and waits for a thread of its own.
    fn finish(&mut self) {
        drop(self.stop.take());
        if let Keeper::Thread(thread) = std::mem::replace(&mut self.keeper, Keeper::None) {
            let _ = thread.join();
        }
    }
}

impl Drop for PortLease {
    fn drop(&mut self) {
        // The keeper sees its stop sender gone and removes the mapping.
        self.finish();
    }
}

/// Where a status goes: the watchers, and the owner's `on_change`.
struct Report {
    status: watch::Sender<MapStatus>,
    on_change: Box<dyn FnMut(&MapStatus) + Send>,
}

impl Report {
    fn new(
        status: watch::Sender<MapStatus>,
        on_change: impl FnMut(&MapStatus) + Send + 'static,
    ) -> Self {
        Self {
            status,
            on_change: Box::new(on_change),
        }
    }

    /// Tells of `now` unless nothing changed (the same failure again).
    fn set(&mut self, now: MapStatus) {
        if *self.status.borrow() != now {
            (self.on_change)(&now);
            self.status.send_replace(now);
        }
    }
}

/// The life of a mapping (the diagram at the top of this module).
async fn keep(
    config: PortMapConfig,
    port: u16,
    mut report: Report,
    mut stop: oneshot::Receiver<()>,
) {
    let mut mapping: Option<Mapping> = None;
    loop {
        if mapping.is_none() {
            let tried = tokio::select! {
                tried = map_port(&config, port) => tried,
                _ = &mut stop => break,
            };
            let now = match tried {
                Ok(made) => {
                    let now = MapStatus::Mapped {
                        method: made.method(),
                        external: made.external(),
                        text: made.describe(),
                    };
                    mapping = Some(made);
                    now
                }
                Err(error) => MapStatus::Failed(error),
            };
            report.set(now);
        }
        let wait = mapping
            .as_ref()
            .map_or(Some(config.retry), Mapping::renew_in);
        let sleep = async {
            match wait {
                Some(wait) => tokio::time::sleep(wait).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep => {}
            _ = &mut stop => break,
        }
        if let Some(held) = &mut mapping {
            if let Err(why) = held.renew(config.timeout).await {
                tracing::warn!(%why, "port mapping not renewed; asking again");
                mapping = None;
            }
        }
    }
    let outcome = match mapping {
        Some(held) => {
            let (method, external) = (held.method(), held.external());
            match held.remove(config.timeout).await {
                Ok(()) => format!("the {method} mapping of {external} was removed"),
                Err(why) => format!(
                    "the {method} mapping of {external} was not removed ({why}); it ends with its lease"
                ),
            }
        }
        None => "no port mapping was held".into(),
    };
    tracing::info!(%outcome, "port mapping stopped");
    report.set(MapStatus::Stopped(outcome));
}
