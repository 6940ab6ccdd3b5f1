//! Where the master keeps its servers, behind a small trait so that a shared
//! store (Redis) can back several master instances.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use switchboard::socket::address_key;

use crate::protocol::{Filter, ListPage, ListRequest, Listed, ServerInfo, MAX_PAGE};

/// A registry could not be read or written (a shared store is down or too
/// slow). The master answers nothing it cannot check: a heartbeat gets no
/// query, a list request is closed with this reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("server list unavailable: {0}")]
pub struct RegistryError(pub String);

/// What a registry holds to at most, from [`MasterConfig`](crate::MasterConfig).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Servers listed at most.
    pub max_servers: usize,
    /// Servers listed per IP at most.
    pub max_servers_per_address: usize,
    /// A server not heard from for this long is no longer listed.
    pub expiry: Duration,
    /// How much longer than `expiry` the server this call lists or
    /// refreshes lives: zero for native servers (a heartbeat every 5 s),
    /// `torque_expiry - expiry` for a Torque server (one every 120 s).
    pub grace: Duration,
}

/// What a heartbeat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// The server is listed, and now refreshed.
    Listed,
    /// Not listed, and there is room for it.
    New,
    /// Not listed, and the registry is full.
    Full,
    /// Not listed, and its IP has the most servers allowed.
    IpFull,
}

/// What an upsert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upserted {
    /// Newly listed.
    Added,
    /// Was listed; its info and time refreshed.
    Refreshed,
    /// Not listed: the registry is full.
    Full,
    /// Not listed: its IP has the most servers allowed.
    IpFull,
}

/// The store of listed servers: [`MemoryRegistry`] in one process,
/// `switchboard_redis::RedisRegistry` shared by several masters. Each call
/// that checks a limit also applies it, in one step, so that masters
/// sharing a store cannot together list more than the limits allow.
pub trait Registry: Send {
    /// A heartbeat from `addr`: refreshes it when listed, else says whether
    /// there is room for it.
    fn heartbeat(
        &mut self,
        addr: SocketAddr,
        now: Instant,
        limits: Limits,
    ) -> impl Future<Output = Result<Heard, RegistryError>> + Send;
    /// Lists or refreshes a server, unless a new one has no room.
    fn upsert(
        &mut self,
        addr: SocketAddr,
        info: ServerInfo,
        now: Instant,
        limits: Limits,
    ) -> impl Future<Output = Result<Upserted, RegistryError>> + Send;
    /// Takes `addr` off the list (it said goodbye); whether it was listed.
    fn remove(
        &mut self,
        addr: SocketAddr,
    ) -> impl Future<Output = Result<bool, RegistryError>> + Send;
    /// Drops servers not heard from since `now - expiry`; returns how many.
    fn expire(
        &mut self,
        now: Instant,
        expiry: Duration,
    ) -> impl Future<Output = Result<usize, RegistryError>> + Send;
    /// One page of the servers matching `request.filter`, and how many match.
    fn query(
        &mut self,
        request: &ListRequest,
    ) -> impl Future<Output = Result<ListPage, RegistryError>> + Send;
    /// Every server matching `filter`, at most `max`, in address order,
    /// read in one pass (what a Torque list request needs whole).
    fn matching(
        &mut self,
        filter: &Filter,
        max: usize,
    ) -> impl Future<Output = Result<Vec<Listed>, RegistryError>> + Send;
    /// How many servers were listed when last counted (no round trip).
    fn len(&self) -> usize;
    /// Whether none were.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The in-memory registry.
#[derive(Debug, Default)]
pub struct MemoryRegistry {
    servers: BTreeMap<SocketAddr, (ServerInfo, Instant)>,
    /// Servers listed per IP (an IPv6 /64 as one), so that a heartbeat's
    /// check costs the same with 10 servers listed as with 10,000.
    per_address: HashMap<IpAddr, usize>,
}

impl MemoryRegistry {
    /// Whether a new server at `addr` may be listed: `Ok(None)` when there
    /// is room, `Ok(Some(ip))` when the registry is full but the IP holding
    /// the most servers holds at least two more than `addr`'s (one of its
    /// servers gives way: a full registry is shared out fairly, newcomers
    /// first), else why not.
    fn room_for(&self, addr: SocketAddr, limits: Limits) -> Result<Option<IpAddr>, Upserted> {
        let key = address_key(addr.ip());
        let on_ip = self.per_address.get(&key).copied().unwrap_or(0);
        if on_ip >= limits.max_servers_per_address {
            return Err(Upserted::IpFull);
        }
        if self.servers.len() < limits.max_servers {
            return Ok(None);
        }
        match self.per_address.iter().max_by_key(|(_, n)| **n) {
            Some((heaviest, n)) if *n >= on_ip + 2 => Ok(Some(*heaviest)),
            _ => Err(Upserted::Full),
        }
    }

    /// Takes off one server of `ip`, the one heard from longest ago.
    fn give_way(&mut self, ip: IpAddr) {
        let oldest = self
            .servers
            .iter()
            .filter(|(a, _)| address_key(a.ip()) == ip)
            .min_by_key(|(_, (_, seen))| *seen)
            .map(|(a, _)| *a);
        if let Some(addr) = oldest {
            self.servers.remove(&addr);
            Self::forget_ip(&mut self.per_address, addr);
            tracing::info!(%addr, "server delisted to make room: its IP holds the most servers");
        }
    }

    /// One server fewer on `addr`'s IP.
    fn forget_ip(per_address: &mut HashMap<IpAddr, usize>, addr: SocketAddr) {
        let key = address_key(addr.ip());
        if let Some(count) = per_address.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                per_address.remove(&key);
            }
        }
    }

    fn page(&self, request: &ListRequest) -> ListPage {
        let servers = self.servers.iter().map(|(addr, (info, _))| (addr, info));
        page_of(servers, request)
    }
}

/// The page `request` asks for out of `servers` (in address order): every
/// server is matched against the filter once, and only the page's own are
/// copied, so that a page costs what it holds plus one comparison per
/// server, never a copy of the whole list.
pub fn page_of<'a>(
    servers: impl IntoIterator<Item = (&'a SocketAddr, &'a ServerInfo)>,
    request: &ListRequest,
) -> ListPage {
    let size = usize::from(request.page_size.clamp(1, MAX_PAGE));
    let first = (request.page as usize).saturating_mul(size);
    let mut total = 0usize;
    let mut page = Vec::with_capacity(size);
    for (addr, info) in servers {
        if !request.filter.matches(info) {
            continue;
        }
        if total >= first && page.len() < size {
            page.push(Listed {
                addr: *addr,
                info: info.clone(),
            });
        }
        total += 1;
    }
    ListPage {
        servers: page,
        page: request.page,
        total: u32::try_from(total).unwrap_or(u32::MAX),
    }
}

impl Registry for MemoryRegistry {
    async fn heartbeat(
        &mut self,
        addr: SocketAddr,
        now: Instant,
        limits: Limits,
    ) -> Result<Heard, RegistryError> {
        if let Some((_, seen)) = self.servers.get_mut(&addr) {
            *seen = now + limits.grace;
            return Ok(Heard::Listed);
        }
        Ok(match self.room_for(addr, limits) {
            Ok(_) => Heard::New,
            Err(Upserted::IpFull) => Heard::IpFull,
            Err(_) => Heard::Full,
        })
    }

    async fn upsert(
        &mut self,
        addr: SocketAddr,
        info: ServerInfo,
        now: Instant,
        limits: Limits,
    ) -> Result<Upserted, RegistryError> {
        let added = !self.servers.contains_key(&addr);
        if added {
            match self.room_for(addr, limits) {
                Ok(None) => {}
                Ok(Some(heaviest)) => self.give_way(heaviest),
                Err(refused) => return Ok(refused),
            }
        }
        // Its life is counted from a moment `grace` ahead: it expires that
        // much later than the others.
        self.servers.insert(addr, (info, now + limits.grace));
        if added {
            *self.per_address.entry(address_key(addr.ip())).or_default() += 1;
        }
        Ok(if added {
            Upserted::Added
        } else {
            Upserted::Refreshed
        })
    }

    async fn remove(&mut self, addr: SocketAddr) -> Result<bool, RegistryError> {
        let removed = self.servers.remove(&addr).is_some();
        if removed {
            Self::forget_ip(&mut self.per_address, addr);
        }
        Ok(removed)
    }

    async fn expire(&mut self, now: Instant, expiry: Duration) -> Result<usize, RegistryError> {
        let before = self.servers.len();
        let per_address = &mut self.per_address;
        self.servers.retain(|addr, (_, seen)| {
            let live = now.saturating_duration_since(*seen) <= expiry;
            if !live {
                Self::forget_ip(per_address, *addr);
            }
            live
        });
        Ok(before - self.servers.len())
    }

    async fn query(&mut self, request: &ListRequest) -> Result<ListPage, RegistryError> {
        Ok(self.page(request))
    }

    async fn matching(
        &mut self,
        filter: &Filter,
        max: usize,
    ) -> Result<Vec<Listed>, RegistryError> {
        Ok(self
            .servers
            .iter()
            .filter(|(_, (info, _))| filter.matches(info))
            .take(max)
            .map(|(addr, (info, _))| Listed {
                addr: *addr,
                info: info.clone(),
            })
            .collect())
    }

    fn len(&self) -> usize {
        self.servers.len()
    }
}
