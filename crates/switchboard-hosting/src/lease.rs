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
//! [`PortLease`] runs this as a task on the caller's tokio runtime;
//! [`PortMapper`] on a thread of its own, for a game loop without tokio or
//! a server whose runtime ends before the mapping must be removed.

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

/// What both handles hold: the status as it changes, and the stop signal
/// (dropped: the keeper removes the mapping and ends).
#[derive(Debug)]
struct Control {
    status: watch::Receiver<MapStatus>,
    stop: Option<oneshot::Sender<()>>,
}

impl Control {
    /// A handle's control, and what its keeper reports to and stops on.
    fn new(
        on_change: impl FnMut(&MapStatus) + Send + 'static,
    ) -> (Self, Report, oneshot::Receiver<()>) {
        let (status_tx, status) = watch::channel(MapStatus::Trying);
        let (stop, stopped) = oneshot::channel();
        let control = Self {
            status,
            stop: Some(stop),
        };
        (control, Report::new(status_tx, on_change), stopped)
    }

    fn status(&self) -> MapStatus {
        self.status.borrow().clone()
    }

    fn stop(&mut self) {
        drop(self.stop.take());
    }
}

/// A port kept mapped by a task on the current tokio runtime. Stop it with
/// [`PortLease::stop`]; dropping it stops it too (the removal then runs
/// on as long as the runtime does).
#[derive(Debug)]
pub struct PortLease {
    control: Control,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl PortLease {
    /// Starts mapping the TCP port `local_port` of this machine. Must be
    /// called within a tokio runtime.
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
        let (control, report, stopped) = Control::new(on_change);
        let task = tokio::spawn(keep(config, local_port, report, stopped));
        Self {
            control,
            task: Some(task),
        }
    }

    /// The status now.
    pub fn status(&self) -> MapStatus {
        self.control.status()
    }

    /// Every change of status, as a `watch` receiver (to show it as it
    /// changes).
    pub fn watch(&self) -> watch::Receiver<MapStatus> {
        self.control.status.clone()
    }

    /// Waits for the first answer: mapped, or why not.
    pub async fn ready(&mut self) -> MapStatus {
        // An error: the task is gone, and its last word is the status.
        let _ = self
            .control
            .status
            .wait_for(|status| *status != MapStatus::Trying)
            .await;
        self.status()
    }

    /// Removes the mapping (bounded by [`PortMapConfig::timeout`]) and
    /// says what became of it.
    pub async fn stop(mut self) -> MapStatus {
        self.control.stop();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.status()
    }
}

impl Drop for PortLease {
    fn drop(&mut self) {
        // The task sees its stop sender gone and removes the mapping.
        self.control.stop();
    }
}

/// A port kept mapped by a thread of its own: for a game without tokio,
/// and for a server that must remove its mapping after its runtime has
/// stopped. Stopping it (or dropping it) removes the mapping, waiting at
/// most [`PortMapConfig::timeout`] for the gateway.
#[derive(Debug)]
pub struct PortMapper {
    control: Control,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PortMapper {
    /// Starts mapping the TCP port `local_port` of this machine, in the
    /// background: the first answer takes at most a timeout per method.
    pub fn start(config: PortMapConfig, local_port: u16) -> Self {
        Self::start_with(config, local_port, |_| {})
    }

    /// [`PortMapper::start`], with `on_change` called on the mapper's
    /// thread at every change of status (to log or show it).
    pub fn start_with(
        config: PortMapConfig,
        local_port: u16,
        on_change: impl FnMut(&MapStatus) + Send + 'static,
    ) -> Self {
        let (control, mut report, stopped) = Control::new(on_change);
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
        let thread = match thread {
            Ok(thread) => Some(thread),
            Err(e) => {
                tracing::error!(%e, "port mapping thread not started");
                None
            }
        };
        Self { control, thread }
    }

    /// The status now.
    pub fn status(&self) -> MapStatus {
        self.control.status()
    }

    /// Every change of status, as a `watch` receiver.
    pub fn watch(&self) -> watch::Receiver<MapStatus> {
        self.control.status.clone()
    }

    /// Blocks until the first answer (mapped, or why not), or `timeout`.
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

    /// Removes the mapping and says what became of it.
    pub fn stop(mut self) -> MapStatus {
        self.finish();
        self.status()
    }

    fn finish(&mut self) {
        self.control.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for PortMapper {
    fn drop(&mut self) {
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
