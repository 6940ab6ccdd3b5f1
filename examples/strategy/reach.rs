//! How players on the internet reach a hosted game, decided by the host:
//! the router's port mapping first, checked by a master connecting back
//! when the game has one; the join-code relay when that does not work (or
//! cannot be checked). The decision is one line of news, which the lobby
//! shows beside the others.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use switchboard_hosting::{MapStatus, PortMapConfig};

use crate::hosting::{Mapping, RelayLink};

/// What the host has to reach the internet with.
pub(crate) struct Plan {
    /// Ask the router (with this config) to forward `ports`, or not at all.
    pub(crate) map: Option<PortMapConfig>,
    /// `(what, port, protocol)`: the game's port first.
    pub(crate) ports: Vec<(&'static str, u16, switchboard_hosting::Protocol)>,
    /// Masters that can check a mapped port from outside.
    pub(crate) masters: Vec<SocketAddr>,
    /// A join-code relay to fall back on.
    pub(crate) relay: Option<String>,
    /// Where the game's server listens (the relay's players go there).
    pub(crate) server: SocketAddr,
    /// The game's listing on its masters, to show the join code in.
    pub(crate) listing: Option<switchboard::process::ListingTagger>,
}

/// The host's means of being reached, kept until [`Reach::stop`].
pub(crate) struct Reach {
    mapping: Arc<Mapping>,
    relay: Arc<Mutex<Option<RelayLink>>>,
    stopping: Arc<AtomicBool>,
    decision: Option<std::thread::JoinHandle<()>>,
}

/// The source name of the decision's line of news.
const SOURCE: &str = "players on the internet";

impl Reach {
    /// Starts deciding, in the background; every step is a line on `news`.
    pub(crate) fn start(plan: Plan, news: &mpsc::Sender<String>) -> Self {
        let mapping = Arc::new(match &plan.map {
            Some(config) => Mapping::start(config.clone(), &plan.ports, news),
            None => Mapping::default(),
        });
        let relay = Arc::new(Mutex::new(None));
        let stopping = Arc::new(AtomicBool::new(false));
        let (m, r, s, news) = (
            mapping.clone(),
            relay.clone(),
            stopping.clone(),
            news.clone(),
        );
        let decision = std::thread::Builder::new()
            .name("reach".into())
            .spawn(move || decide(plan, &m, &r, &s, &news))
            .ok();
        Self {
            mapping,
            relay,
            stopping,
            decision,
        }
    }

    /// Stops deciding, closes the relay link, removes the mappings.
    pub(crate) fn stop(mut self) {
        self.stopping.store(true, Ordering::Relaxed);
        if let Some(decision) = self.decision.take() {
            let _ = decision.join();
        }
        drop(self.relay.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Ok(mapping) = Arc::try_unwrap(self.mapping) {
            mapping.stop();
        }
    }
}

/// Direct if the router forwards the port and a master reaches it (or no
/// master can tell); the relay otherwise, or beside an unchecked mapping.
fn decide(
    plan: Plan,
    mapping: &Mapping,
    relay: &Mutex<Option<RelayLink>>,
    stopping: &AtomicBool,
    news: &mpsc::Sender<String>,
) {
    let say = |line: String| {
        let _ = news.send(format!("{SOURCE}: {line}"));
    };
    let direct = match plan.map {
        None => Err("this game asks no router".to_string()),
        Some(_) => match mapping.first_answer(stopping) {
            None => return,
            Some(MapStatus::Mapped { external, .. }) => check(external, &plan.masters),
            Some(status) => Err(status.to_string()),
        },
    };
    if stopping.load(Ordering::Relaxed) {
        return;
    }
    let use_relay = match &direct {
        Ok((external, Some(master))) => {
            say(format!(
                "they join at {external} (direct: the master at {master} connected back to it)"
            ));
            false
        }
        Ok((external, None)) => {
            say(format!(
                "they join at {external} (direct; not checked from outside: no master)"
            ));
            true
        }
        Err(why) => {
            if plan.relay.is_none() {
                say(format!(
                    "not reachable directly ({why}); give --rendezvous HOST:PORT to host through a relay"
                ));
            }
            true
        }
    };
    let Some(address) = plan.relay.filter(|_| use_relay) else {
        return;
    };
    match RelayLink::start(address.clone(), plan.server, news, plan.listing) {
        Ok(link) => {
            *relay.lock().unwrap_or_else(|e| e.into_inner()) = Some(link);
            let why = direct
                .err()
                .unwrap_or_else(|| "beside the unchecked address".into());
            say(format!(
                "they join through the relay at {address} with the code it gives ({why})"
            ));
        }
        Err(e) => say(format!("the relay at {address} could not be used: {e}")),
    }
}

/// Asks the masters, in turn, whether `external` reaches the game: the
/// address and the master that connected back, or the address and `None`
/// when no master answered; an error when one connected back and failed.
fn check(
    external: SocketAddr,
    masters: &[SocketAddr],
) -> Result<(SocketAddr, Option<SocketAddr>), String> {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Ok((external, None));
    };
    for &master in masters {
        let asked = runtime.block_on(switchboard_master::probe_reachable(
            master,
            external.port(),
            Duration::from_secs(5),
        ));
        match asked {
            Ok(result) if result.reachable => return Ok((external, Some(master))),
            Ok(result) => {
                return Err(format!(
                    "the master at {master} could not reach {}: {}",
                    result.addr, result.detail
                ))
            }
            Err(e) => tracing::debug!(%master, %e, "no probe from this master"),
        }
    }
    Ok((external, None))
}
