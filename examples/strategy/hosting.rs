//! The host's side of reaching players on the internet: the router asked
//! to forward the game's ports (a mapper per port, removed when the game
//! ends and on Ctrl-C), and a link to a join-code relay. Their news go to
//! the player's log and lobby.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use switchboard_hosting::{
    HostConfig, HostLink, HostStatus, HostTarget, PortLease, PortMapConfig, Protocol,
};

/// The ports a hosted game keeps forwarded.
#[derive(Default)]
pub(crate) struct Mapping {
    mappers: Arc<Mutex<Vec<PortLease>>>,
}

impl Mapping {
    /// Starts a mapper for each `(what, port, protocol)`. Each change of
    /// status comes as a line on `news` ("port mapping (game port 7100):
    /// reachable at ...").
    pub(crate) fn start(
        config: PortMapConfig,
        ports: &[(&'static str, u16, Protocol)],
        news: &mpsc::Sender<String>,
    ) -> Self {
        let mappers = ports
            .iter()
            .map(|&(what, port, protocol)| {
                let news = news.clone();
                let config = PortMapConfig {
                    protocol,
                    ..config.clone()
                };
                PortLease::start_thread_with(config, port, move |status| {
                    let _ = news.send(format!("port mapping ({what} port {port}): {status}"));
                })
            })
            .collect();
        let mapping = Self {
            mappers: Arc::new(Mutex::new(mappers)),
        };
        mapping.stop_on_ctrl_c();
        mapping
    }

    /// The first answer for the first port (the game's): mapped, or why
    /// not; `None` if `stopping` turned true first.
    pub(crate) fn first_answer(
        &self,
        stopping: &std::sync::atomic::AtomicBool,
    ) -> Option<switchboard_hosting::MapStatus> {
        use switchboard_hosting::MapStatus;
        loop {
            let status = self
                .mappers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .first()?
                .status();
            if status != MapStatus::Trying {
                return Some(status);
            }
            if stopping.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Removes every mapping, saying what became of each.
    pub(crate) fn stop(self) {
        stop_all(&self.mappers);
    }

    /// Ctrl-C (in the typed interface; the full-screen one reads it as a
    /// key) removes the mappings before the process ends: a router keeps
    /// a mapping left behind until its lease ends, an hour.
    fn stop_on_ctrl_c(&self) {
        let mappers = self.mappers.clone();
        let watcher = std::thread::Builder::new()
            .name("ctrl-c".into())
            .spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                if runtime.block_on(tokio::signal::ctrl_c()).is_ok() {
                    stop_all(&mappers);
                    std::process::exit(130);
                }
            });
        if let Err(e) = watcher {
            eprintln!("port mapping: Ctrl-C will not remove it ({e})");
        }
    }
}

fn stop_all(mappers: &Mutex<Vec<PortLease>>) {
    let taken = std::mem::take(&mut *mappers.lock().unwrap_or_else(|e| e.into_inner()));
    for mapper in taken {
        println!("port mapping: {}", mapper.stop_blocking());
    }
}

/// A hosted game's link to a join-code relay, on a thread of its own: the
/// relay's players are piped to the game's server (a child process, at
/// `server`). Dropping it closes the link; the relay keeps the code for
/// its grace, then forgets it.
pub(crate) struct RelayLink {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RelayLink {
    /// Links to the relay at `relay` (`host:port`); each change of status
    /// comes as a line on `news` ("join-code relay: join code K7PQ2M: ...").
    /// With `listing`, the game's listing on its masters shows the code
    /// (the tag `join=K7PQ2M@relay:7400`), so server browsers offer it.
    pub(crate) fn start(
        relay: String,
        server: std::net::SocketAddr,
        news: &mpsc::Sender<String>,
        listing: Option<switchboard::process::ListingTagger>,
    ) -> Result<Self, String> {
        let news = news.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("no runtime for the relay link: {e}"))?;
        let thread = std::thread::Builder::new()
            .name("join-code relay".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let target = HostTarget::Forward(server);
                    let link = HostLink::start_with(HostConfig::new(relay), target, move |s| {
                        if let (HostStatus::Ready { code, relay, .. }, Some(listing)) =
                            (s, &listing)
                        {
                            let join = format!("{code}@{relay}");
                            if let Err(e) =
                                listing.tag(switchboard_master::protocol::JOIN_TAG, &join)
                            {
                                tracing::warn!(%e, "the listing does not show the join code");
                            }
                        }
                        let _ = news.send(format!("join-code relay: {s}"));
                    });
                    let _ = stopped.await;
                    link.stop();
                });
            })
            .map_err(|e| format!("no thread for the relay link: {e}"))?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for RelayLink {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
