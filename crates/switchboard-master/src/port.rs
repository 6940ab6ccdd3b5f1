//! A second listing protocol on a UDP port of its own, over the master's
//! registry: Torque's (`switchboard-torque`). The master reads its port,
//! hands each datagram to it with a [`Lister`] (the registry, the listed
//! servers' challenges, the shared counters), and sends back the one reply
//! it returns, always to the datagram's source.
//!
//! ```text
//!  UDP port ──datagram──▶ MasterServer ──on_datagram(Lister, from, bytes)──▶ the port's protocol
//!                                                ◀── Option<reply> (to `from`) ──
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use switchboard::admin::Counter;

use crate::master::Master;
use crate::protocol::{Filter, Listed, ServerInfo};
use crate::registry::{Heard, Limits, Registry, Upserted};
use crate::{MasterConfig, MasterStats};

/// A listing protocol of its own on a UDP port of its own: its datagrams
/// in, one reply out (to the datagram's source), its servers kept in the
/// master's registry through a [`Lister`]. Built with the master's
/// settings by [`MasterBuilder::listing_port`](crate::MasterBuilder::listing_port).
pub trait ListingPort<R: Registry>: Send + Sized + 'static {
    /// The longest datagram read on the port; longer ones are cut there.
    const MAX_DATAGRAM: usize;

    /// One datagram from `from`, read at `now`: the reply to send back to
    /// `from`, if any.
    fn on_datagram(
        &mut self,
        master: Lister<'_, R, Self>,
        from: SocketAddr,
        bytes: &[u8],
        now: Instant,
    ) -> impl Future<Output = Option<Vec<u8>>> + Send;

    /// Once a master tick: forgets what went stale.
    fn tick(&mut self, now: Instant, master: &MasterConfig);

    /// How long a server listed through this port lives unheard: after
    /// missed datagrams, the master expires nothing for this long (or its
    /// own expiry, whichever is longer).
    fn expiry(&self) -> Duration;

    /// Its counters, for the admin page and the master's stats.
    fn counters(&self) -> Vec<Counter>;
}

/// No second port: the master serves its own protocol only.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPort;

impl<R: Registry> ListingPort<R> for NoPort {
    const MAX_DATAGRAM: usize = 0;

    async fn on_datagram(
        &mut self,
        _: Lister<'_, R, Self>,
        _: SocketAddr,
        _: &[u8],
        _: Instant,
    ) -> Option<Vec<u8>> {
        None
    }

    fn tick(&mut self, _: Instant, _: &MasterConfig) {}

    fn expiry(&self) -> Duration {
        Duration::ZERO
    }

    fn counters(&self) -> Vec<Counter> {
        Vec::new()
    }
}

/// What a [`ListingPort`] may do to the master while it handles a
/// datagram: read and write the registry under the master's limits (with
/// its own `grace` on top of the master's expiry), remember a listed
/// server's answered challenge, and count the refusals every port shares.
pub struct Lister<'a, R: Registry, P> {
    pub(crate) master: &'a mut Master<R, P>,
}

impl<R: Registry, P: ListingPort<R>> Lister<'_, R, P> {
    /// The master's settings.
    pub fn config(&self) -> &MasterConfig {
        self.master.config()
    }

    /// The master's counters: a port counts in them what every port shares
    /// (`refused_full`, `refused_per_address`, `challenges_evicted`).
    pub fn stats(&mut self) -> &mut MasterStats {
        &mut self.master.stats
    }

    /// A heartbeat from `from`: refreshes it when listed. Whether it may be
    /// challenged (listed, or there is room for it); a full registry or
    /// address is counted, a failed registry call logged.
    pub async fn heartbeat(&mut self, from: SocketAddr, now: Instant, grace: Duration) -> bool {
        let limits = self.limits(grace);
        let heard = self.master.registry.heartbeat(from, now, limits).await;
        match self.master.checked(heard) {
            Some(Heard::Listed | Heard::New) => true,
            Some(Heard::Full) => {
                self.master.stats.refused_full += 1;
                false
            }
            Some(Heard::IpFull) => {
                self.master.stats.refused_per_address += 1;
                false
            }
            None => false,
        }
    }

    /// A heartbeat over the port's rate: refreshes the server listed at
    /// `from`, once a second at most, so that forged heartbeats cannot use
    /// up its rate and delist it.
    pub async fn refresh_over_rate(&mut self, from: SocketAddr, now: Instant, grace: Duration) {
        let limits = self.limits(grace);
        self.master.refresh_over_rate(from, now, limits).await;
    }

    /// Lists or refreshes the server at `from` that answered `challenge`:
    /// `Added` or `Refreshed`, or `None` when it is not listed (a full
    /// registry or address, counted; a failed call, logged).
    pub async fn upsert(
        &mut self,
        from: SocketAddr,
        challenge: u64,
        info: ServerInfo,
        now: Instant,
        grace: Duration,
    ) -> Option<Upserted> {
        let limits = self.limits(grace);
        let upserted = self.master.registry.upsert(from, info, now, limits).await;
        match self.master.checked(upserted)? {
            listed @ (Upserted::Added | Upserted::Refreshed) => {
                self.master.remember_answered(from, challenge);
                Some(listed)
            }
            Upserted::Full => {
                self.master.stats.refused_full += 1;
                None
            }
            Upserted::IpFull => {
                self.master.stats.refused_per_address += 1;
                None
            }
        }
    }

    /// Up to `max` listed servers matching `filter`, ordered by address;
    /// `None` when the registry could not be read (logged).
    pub async fn matching(&mut self, filter: &Filter, max: usize) -> Option<Vec<Listed>> {
        let found = self.master.registry.matching(filter, max).await;
        self.master.checked(found)
    }

    fn limits(&self, grace: Duration) -> Limits {
        Limits {
            grace,
            ..self.master.registry_limits()
        }
    }
}
