//! [`MasterBuilder`]: how a master is described and started (where it
//! listens, its settings, its registry, a second listing port), as every
//! server's builder; [`RunningMaster`] once it runs.

use switchboard::lifecycle::{ListenOptions, Running, StopHandle};

use crate::port::{ListingPort, NoPort};
use crate::registry::{MemoryRegistry, Registry};
use crate::server::{MasterHandle, MasterServer};
use crate::MasterConfig;

impl MasterServer<MemoryRegistry> {
    /// Starts describing a master: loopback, a free port (the same for UDP
    /// and TCP), default settings, the in-memory registry, until told
    /// otherwise.
    pub fn builder() -> MasterBuilder<MemoryRegistry> {
        MasterBuilder {
            config: MasterConfig::default(),
            listen: ListenOptions::default(),
            registry: MemoryRegistry::default(),
            listing_port: ListingPortSpec {
                port: None,
                make: Box::new(|_| NoPort),
            },
        }
    }
}

/// A master about to start, made by [`MasterServer::builder`]: the same
/// shape as a game server's `ServerManager::builder`.
#[derive(Debug)]
pub struct MasterBuilder<R, P = NoPort> {
    config: MasterConfig,
    listen: ListenOptions,
    registry: R,
    listing_port: ListingPortSpec<P>,
}

/// The second port asked for, and how its protocol is made from the
/// master's settings.
pub(crate) struct ListingPortSpec<P> {
    pub(crate) port: Option<u16>,
    pub(crate) make: Box<dyn FnOnce(&MasterConfig) -> P + Send>,
}

impl<P> std::fmt::Debug for ListingPortSpec<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListingPort")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// A master running in this process: reads like its [`MasterHandle`];
/// `shutdown().await` (or `shutdown_blocking()`) stops it and waits for it.
pub type RunningMaster = Running<MasterHandle, ()>;

impl StopHandle for MasterHandle {
    fn stop(&self) {
        self.shutdown();
    }
}

impl<R: Registry, P: ListingPort<R>> MasterBuilder<R, P> {
    /// The master's settings (expiry, limits).
    pub fn config(mut self, config: MasterConfig) -> Self {
        self.config = config;
        self
    }

    switchboard::listen_setters!(
        "The port, UDP and TCP (default 0: a free one, read with `local_addr`)."
    );

    /// Where the listed servers are kept (default in memory; the
    /// `switchboard-redis` crate's `RedisRegistry` shares them between
    /// masters).
    pub fn registry<R2: Registry>(self, registry: R2) -> MasterBuilder<R2, P>
    where
        P: ListingPort<R2>,
    {
        MasterBuilder {
            config: self.config,
            listen: self.listen,
            registry,
            listing_port: self.listing_port,
        }
    }

    /// A second listing protocol on UDP `port` of the same interfaces (0: a
    /// free one, read with [`MasterHandle::listing_port_addr`]), made from
    /// the master's settings by `make`: Torque's is
    /// `switchboard_torque::TorquePort`.
    pub fn listing_port<P2: ListingPort<R>>(
        self,
        port: u16,
        make: impl FnOnce(&MasterConfig) -> P2 + Send + 'static,
    ) -> MasterBuilder<R, P2> {
        MasterBuilder {
            config: self.config,
            listen: self.listen,
            registry: self.registry,
            listing_port: ListingPortSpec {
                port: Some(port),
                make: Box::new(make),
            },
        }
    }

    /// Binds and returns the master and its handle, for tokio code that
    /// runs it itself (`server.run(stop).await`).
    pub fn build(self) -> std::io::Result<(MasterServer<R, P>, MasterHandle)> {
        let addr = self.listen.addr();
        MasterServer::bind_with(addr, self.config, self.registry, self.listing_port)
    }

    /// Binds and runs the master on the background runtime (or the
    /// current one).
    pub fn spawn(self) -> std::io::Result<RunningMaster>
    where
        R: 'static,
    {
        let (server, handle) = self.build()?;
        Ok(Running::spawn(handle, server.run(std::future::pending())))
    }
}
