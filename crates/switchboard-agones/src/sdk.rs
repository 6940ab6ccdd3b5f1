//! The official SDK client driving [`Lifecycle`]: on a runtime of its own
//! (one thread), so that it connects before the server's runtime exists
//! and reports on the server only through the server's answers to its
//! probe.

use std::future::Future;
use std::time::{Duration, Instant};

use agones::{GameServer, Sdk};
use futures::StreamExt;
use tokio::runtime::Runtime;

use crate::lifecycle::{Action, Allocation, Lifecycle, Report, PLAYERS};
use crate::{AgonesConfig, AgonesError};

/// The port of the SDK server when `AGONES_SDK_GRPC_PORT` is not set.
const DEFAULT_PORT: u16 = 9357;

/// What the game server hears from its life on Agones.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// A GameServerAllocation chose this server for a match: what it
    /// asked for.
    Allocated(Allocation),
    /// Shutdown was asked for (the game ended, or the server stayed empty):
    /// the server should stop taking players, tell the connected ones, and
    /// exit (Agones also sends SIGTERM).
    Shutdown,
    /// Agones refused Ready: the server cannot serve on this fleet.
    Failed(AgonesError),
}

/// A game server connected to its Agones sidecar, not Ready yet.
pub struct Agones {
    runtime: Runtime,
    sdk: Sdk,
    server: GameServer,
    config: AgonesConfig,
}

impl std::fmt::Debug for Agones {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agones")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Agones {
    /// Connects to the SDK server (blocking up to
    /// [`AgonesConfig::connect_timeout`]) and reads the GameServer record.
    /// Fails with [`AgonesError::Unreachable`] when there is no sidecar.
    /// Call it outside any async runtime, before the server starts.
    pub fn connect(config: AgonesConfig) -> Result<Self, AgonesError> {
        let port = match config.port {
            Some(port) => port,
            None => match std::env::var("AGONES_SDK_GRPC_PORT") {
                Ok(text) => text
                    .trim()
                    .parse()
                    .map_err(|_| AgonesError::BadPort(text))?,
                Err(_) => DEFAULT_PORT,
            },
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("agones")
            .enable_all()
            .build()?;
        let timeout = config.connect_timeout;
        let unreachable = AgonesError::Unreachable { port, timeout };
        let (sdk, server) = runtime
            .block_on(async {
                let mut sdk = tokio::time::timeout(timeout, Sdk::new(Some(port), None))
                    .await
                    .ok()
                    .and_then(Result::ok)?;
                let server = sdk.get_gameserver().await.ok()?;
                Some((sdk, server))
            })
            .ok_or(unreachable)?;
        Ok(Self {
            runtime,
            sdk,
            server,
            config,
        })
    }

    /// The GameServer record as it was at connect.
    pub fn game_server(&self) -> &GameServer {
        &self.server
    }

    /// Where players reach the port the Fleet names `port_name`: the
    /// node's address and the port Agones mapped (`HOST:PORT`), from the
    /// GameServer's status; `None` before Agones placed the server.
    pub fn public_addr(&self, port_name: &str) -> Option<String> {
        let status = self.server.status.as_ref()?;
        let port = status.ports.iter().find(|p| p.name == port_name)?.port;
        (!status.address.is_empty() && port > 0).then(|| {
            let host = &status.address;
            if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            }
        })
    }

    /// Marks the server Ready and runs its life: every health interval,
    /// `probe` (answered by the server's own loop; `None` or no answer
    /// within the interval sends no Health), players and rooms reported,
    /// allocations and Shutdown told to `events`. Call it once the server
    /// listens. Stops with the returned [`Running`].
    pub fn serve<P, F>(self, probe: P, events: impl FnMut(Event) + Send + 'static) -> Running
    where
        P: FnMut() -> F + Send + 'static,
        F: Future<Output = Option<Report>> + Send + 'static,
    {
        let lifecycle = Lifecycle::new(&self.config, &self.server);
        let interval = self.config.health_interval;
        self.runtime.spawn(live(
            self.sdk,
            self.server,
            lifecycle,
            interval,
            probe,
            events,
        ));
        Running {
            runtime: Some(self.runtime),
        }
    }
}

/// A server's life on Agones, running until dropped.
#[derive(Debug)]
pub struct Running {
    runtime: Option<Runtime>,
}

impl Drop for Running {
    fn drop(&mut self) {
        // May be dropped inside the server's runtime: never block there.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn live<P, F>(
    mut sdk: Sdk,
    server: GameServer,
    mut lifecycle: Lifecycle,
    interval: Duration,
    mut probe: P,
    mut events: impl FnMut(Event),
) where
    P: FnMut() -> F,
    F: Future<Output = Option<Report>>,
{
    if let Err(err) = sdk.ready().await {
        events(Event::Failed(refused("Ready", err)));
        return;
    }
    tracing::info!("Agones: Ready");
    // Allocated already (this process restarted during its match): told
    // at once.
    if let Some(allocation) = lifecycle.on_game_server(Instant::now(), &server) {
        events(Event::Allocated(allocation));
    }
    let mut health = sdk.health_check();
    let mut watch = sdk.watch_gameserver().await.ok();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if watch.is_none() {
                    watch = sdk.watch_gameserver().await.ok();
                }
                let report = tokio::time::timeout(interval, probe()).await.ok().flatten();
                if report.is_none() {
                    tracing::warn!("Agones: the server did not answer its probe: no Health");
                }
                for action in lifecycle.on_tick(Instant::now(), report.as_ref()) {
                    if action == Action::Health {
                        if health.try_send(()).is_err() {
                            // The health stream ended (the SDK server went
                            // away and came back): a new one.
                            health = sdk.health_check();
                            let _ = health.try_send(());
                        }
                        continue;
                    }
                    let shutdown = action == Action::Shutdown;
                    if let Err(err) = perform(&mut sdk, &action).await {
                        tracing::warn!(?action, %err, "Agones: a call failed");
                    }
                    if shutdown {
                        tracing::info!("Agones: Shutdown asked (the match is over)");
                        events(Event::Shutdown);
                        return;
                    }
                }
            }
            update = next(&mut watch) => match update {
                Some(server) => {
                    if let Some(allocation) = lifecycle.on_game_server(Instant::now(), &server) {
                        tracing::info!(?allocation, "Agones: Allocated");
                        events(Event::Allocated(allocation));
                    }
                }
                // Opened again at the next tick.
                None => watch = None,
            },
        }
    }
}

/// The next update of the watched GameServer; `None` when the watch ended.
/// Without a watch, never.
async fn next(watch: &mut Option<tonic::Streaming<GameServer>>) -> Option<GameServer> {
    match watch {
        Some(stream) => stream.next().await.and_then(Result::ok),
        None => std::future::pending().await,
    }
}

async fn perform(sdk: &mut Sdk, action: &Action) -> Result<(), agones::errors::Error> {
    match action {
        Action::Health => Ok(()),
        Action::Allocate => sdk.allocate().await,
        Action::Shutdown => sdk.shutdown().await,
        Action::AddPlayer(id) => sdk.beta().clone().append_list_value(PLAYERS, id).await,
        Action::RemovePlayer(id) => sdk.beta().clone().delete_list_value(PLAYERS, id).await,
        Action::SetCounter(name, count) => sdk.beta().clone().set_counter_count(name, *count).await,
        Action::SetCounterCapacity(name, capacity) => {
            sdk.beta()
                .clone()
                .set_counter_capacity(name, *capacity)
                .await
        }
        Action::SetLabel(key, value) => sdk.set_label(*key, value.clone()).await,
    }
}

fn refused(call: &'static str, err: agones::errors::Error) -> AgonesError {
    let message = match err {
        agones::errors::Error::Rpc(status) => status.message().to_string(),
        other => other.to_string(),
    };
    AgonesError::Refused { call, message }
}
