//! [`TorquePort`]: the master's second listing port for Torque games. A
//! heartbeat earns an info request under a fresh key (6 bytes for 6); the
//! response lists the server; list requests get one page, re-requests the
//! others from the cached query; game types from a short-lived cache.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use switchboard::admin::Counter;
use switchboard::socket::address_key;
use switchboard_master::protocol::{Filter, Listed};
use switchboard_master::{Lister, ListingPort, MasterConfig, Registry, Upserted};

use crate::packet::{self, Header, Packet, TorqueFilter, TorqueInfo};
use crate::state::TorqueState;
use crate::{matches, server_info, TorqueConfig, TorqueStats, COMPATIBLE_TAG, PROTOCOL_TAG};

/// The longest Torque packet read: a list request with 255 buddies is
/// under 1,100 bytes; longer ones are cut there (and dropped if that
/// truncates them).
const MAX_DATAGRAM: usize = 1500;

/// Torque's master protocol on a port of the master's own (made by
/// `MasterBuilder::listing_port`, or `Master::with_port` in memory).
pub struct TorquePort {
    config: TorqueConfig,
    state: TorqueState,
    stats: TorqueStats,
    /// How much longer than the master's expiry a Torque server lives.
    grace: Duration,
    /// The master's `max_pending`: addresses backed off at most.
    max_pending: usize,
    /// The master's `max_limited_addresses`: proven clients at most.
    max_limited_addresses: usize,
}

impl std::fmt::Debug for TorquePort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TorquePort")
            .field("config", &self.config)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl TorquePort {
    /// The port with `config`, under the limits of `master` it shares
    /// (challenges out, the IP rate of heartbeats, the addresses
    /// remembered, the query timeout).
    pub fn new(config: TorqueConfig, master: &MasterConfig) -> Self {
        Self {
            state: TorqueState::new(&config, master),
            stats: TorqueStats::default(),
            grace: config.expiry.saturating_sub(master.expiry),
            max_pending: master.max_pending,
            max_limited_addresses: master.max_limited_addresses,
            config,
        }
    }

    /// Its counters.
    pub fn stats(&self) -> &TorqueStats {
        &self.stats
    }

    /// Its settings.
    pub fn config(&self) -> &TorqueConfig {
        &self.config
    }
}

impl<R: Registry> ListingPort<R> for TorquePort {
    const MAX_DATAGRAM: usize = MAX_DATAGRAM;

    async fn on_datagram(
        &mut self,
        mut master: Lister<'_, R, Self>,
        from: SocketAddr,
        bytes: &[u8],
        now: Instant,
    ) -> Option<Vec<u8>> {
        self.stats.datagrams += 1;
        let packet = match packet::parse(bytes) {
            Ok(packet) => packet,
            Err(err) => {
                self.stats.dropped += 1;
                tracing::debug!(%from, %err, "Torque packet dropped");
                return None;
            }
        };
        match packet {
            Packet::Heartbeat(_) => self.heartbeat(&mut master, from, now).await,
            Packet::InfoResponse(header, info) => {
                self.info(&mut master, from, header, &info, now).await;
                None
            }
            Packet::ListRequest(header, filter) => {
                let reply = self
                    .list(&mut master, from, header, &filter, bytes.len(), now)
                    .await;
                self.reply(from, reply, now)
            }
            Packet::PageRequest(header, index) => {
                let reply = self.page(from, header, index, now);
                self.reply(from, reply, now)
            }
            Packet::GameTypesRequest(header) => {
                let reply = self
                    .game_types(&mut master, from, header, bytes.len(), now)
                    .await;
                self.reply(from, reply, now)
            }
        }
    }

    fn tick(&mut self, now: Instant, master: &MasterConfig) {
        self.state.tick(now, &self.config, master);
    }

    /// A Torque server lives `expiry` (180 s, above the engine's 120 s
    /// heartbeat).
    fn expiry(&self) -> Duration {
        self.config.expiry
    }

    fn counters(&self) -> Vec<Counter> {
        self.stats.counters()
    }
}

impl TorquePort {
    /// A list page or the game types, if the bytes allowed to `to` (its
    /// own, its prefix's, the master's) have room for it; else counted.
    fn reply(&mut self, to: SocketAddr, reply: Option<Vec<u8>>, now: Instant) -> Option<Vec<u8>> {
        let reply = reply?;
        if !self.state.may_send(to, &reply, now) {
            self.stats.bytes_refused += 1;
            return None;
        }
        self.stats.bytes_sent += reply.len() as u64;
        Some(reply)
    }

    /// The longest first answer to `from` for a request of `len` bytes:
    /// a few times the request, until it has asked again in a session
    /// (a forged source never sees the answer, so it cannot ask again
    /// for a reason of its own; the per-destination bytes bound the rest).
    fn first_answer_len(&self, from: SocketAddr, len: usize) -> usize {
        if self.state.is_proven(from) {
            packet::MAX_REPLY
        } else {
            let most = self.config.unproven_reply_factor * len as f64;
            (most as usize).clamp(packet::HEADER_LEN + 6, packet::MAX_REPLY)
        }
    }

    /// A heartbeat: refreshes a listed server, and asks it (again) for its
    /// info under a fresh key, within the rate.
    async fn heartbeat<R: Registry>(
        &mut self,
        master: &mut Lister<'_, R, Self>,
        from: SocketAddr,
        now: Instant,
    ) -> Option<Vec<u8>> {
        self.stats.heartbeats += 1;
        let allowed = self.state.heartbeats.allow(from, now)
            && self.state.heartbeats_ip.allow(address_key(from.ip()), now);
        if !allowed {
            self.stats.rate_limited += 1;
            master.refresh_over_rate(from, now, self.grace).await;
            return None;
        }
        if self.state.backed_off.contains_key(&from) {
            // Its last challenge drew too many wrong keys.
            self.stats.backed_off += 1;
            return None;
        }
        if !master.heartbeat(from, now, self.grace).await {
            return None;
        }
        // All 32 bits of K are fresh: the engine echoes the whole K of an
        // info request (`handleGameMasterInfoRequest` writes back the key
        // it read), so nothing of it need come from the heartbeat.
        let mut key = [0u8; 4];
        getrandom::fill(&mut key).expect("the OS random source failed");
        let k = u32::from_le_bytes(key);
        match self.state.pending.insert(from, u64::from(k), now) {
            Ok(true) => master.stats().challenges_evicted += 1,
            Ok(false) => {}
            Err(_) => {
                master.stats().refused_per_address += 1;
                return None;
            }
        }
        // 6 bytes for 6 bytes: nothing to amplify.
        Some(packet::info_request(k))
    }

    /// An info response: lists the server if it answers our request (its
    /// address and K).
    async fn info<R: Registry>(
        &mut self,
        master: &mut Lister<'_, R, Self>,
        from: SocketAddr,
        header: Header,
        info: &TorqueInfo,
        now: Instant,
    ) {
        match self.state.pending.get(from) {
            Some(k) if k == u64::from(header.k()) => {}
            Some(_) => {
                self.wrong_key(from, now);
                return;
            }
            None => {
                self.stats.unsolicited += 1;
                return;
            }
        }
        self.state.pending.remove(from);
        self.state.wrong_keys.remove(&from);
        let info = server_info(info);
        if info.check().is_err() {
            self.stats.dropped += 1;
            return;
        }
        let key = u64::from(header.k());
        let upserted = master.upsert(from, key, info, now, self.grace).await;
        if upserted == Some(Upserted::Added) {
            self.stats.registered += 1;
            tracing::info!(%from, "Torque server listed");
        }
    }

    /// An info response from `from` with the wrong key: counted, and past
    /// `torque_max_wrong_keys` its challenge is dropped and the address
    /// gets no new one for `torque_wrong_key_backoff`, so that guessing
    /// the key (32 random bits) ends after a few tries.
    fn wrong_key(&mut self, from: SocketAddr, now: Instant) {
        self.stats.wrong_keys += 1;
        let (wrong, _) = self.state.wrong_keys.entry(from).or_insert((0, now));
        *wrong += 1;
        if *wrong < self.config.max_wrong_keys {
            return;
        }
        self.state.wrong_keys.remove(&from);
        self.state.pending.remove(from);
        if self.state.backed_off.len() < self.max_pending {
            self.state
                .backed_off
                .insert(from, now + self.config.wrong_key_backoff);
        }
        tracing::info!(%from, "Torque challenge dropped after wrong keys; that address backs off");
    }

    /// Whether a list request from `from` is within its rate (counted when
    /// not).
    fn list_allowed(&mut self, from: SocketAddr, now: Instant) -> bool {
        let allowed = self.state.lists.allow(address_key(from.ip()), now);
        if !allowed {
            self.stats.lists_refused += 1;
        }
        allowed
    }

    /// An initial list request: the matching servers, cut into pages and
    /// kept for the client's re-requests; page 0 goes back now.
    async fn list<R: Registry>(
        &mut self,
        master: &mut Lister<'_, R, Self>,
        from: SocketAddr,
        header: Header,
        filter: &TorqueFilter,
        len: usize,
        now: Instant,
    ) -> Option<Vec<u8>> {
        if !self.list_allowed(from, now) {
            return None;
        }
        self.stats.lists += 1;
        if self.state.cache.get((from, header.session)).is_some() {
            // The same session asking again: a client where it says.
            self.state.prove(from, now, self.max_limited_addresses);
        }
        let first_len = self.first_answer_len(from, len);
        let servers = torque_servers(master).await?;
        let addrs: Vec<SocketAddr> = servers
            .iter()
            .filter(|l| matches(filter, &l.info))
            .map(|l| l.addr)
            .collect();
        let new_style = header.flags & packet::query_flags::NEW_STYLE_RESPONSE != 0;
        let pages = packet::paginate(&addrs, new_style, first_len);
        let first = packet::list_page(&header, 0, pages.len(), &pages[0]);
        self.state
            .cache
            .insert((from, header.session), pages, new_style, now);
        self.stats.pages += 1;
        Some(first)
    }

    /// A re-request of one page (new key, zeroed filters): served from the
    /// query cached for this client and session.
    fn page(
        &mut self,
        from: SocketAddr,
        header: Header,
        index: u8,
        now: Instant,
    ) -> Option<Vec<u8>> {
        if !self.list_allowed(from, now) {
            return None;
        }
        if self.state.cache.get((from, header.session)).is_none() {
            // Only a session this address opened is answered.
            self.stats.cache_misses += 1;
            return None;
        }
        self.state.prove(from, now, self.max_limited_addresses);
        let cached = self.state.cache.get((from, header.session))?;
        let page = cached.pages.get(usize::from(index))?;
        // Torque3D's re-request (44) is answered in its own form (40).
        let mut header = header;
        if cached.new_style || header.kind == packet::kind::EXTENDED_LIST_REREQUEST {
            header.flags |= packet::query_flags::NEW_STYLE_RESPONSE;
        }
        let reply = packet::list_page(&header, usize::from(index), cached.pages.len(), page);
        self.stats.pages += 1;
        Some(reply)
    }

    /// The game and mission types the listed Torque servers reported, read
    /// again once `torque_game_types_cache` old. A client not yet proven
    /// gets what fits a few times its request; the same request again
    /// within the session's life gets them all.
    async fn game_types<R: Registry>(
        &mut self,
        master: &mut Lister<'_, R, Self>,
        from: SocketAddr,
        header: Header,
        len: usize,
        now: Instant,
    ) -> Option<Vec<u8>> {
        if !self.list_allowed(from, now) {
            return None;
        }
        let key = (from, header.session);
        if self.state.cache.get(key).is_some() {
            self.state.prove(from, now, self.max_limited_addresses);
        } else {
            // Remembers the session (no pages) for a second request.
            self.state.cache.insert(key, Vec::new(), false, now);
        }
        let fresh = self.state.game_types.as_ref().is_some_and(|(at, _, _)| {
            now.saturating_duration_since(*at) < self.config.game_types_cache
        });
        if !fresh {
            let servers = torque_servers(master).await?;
            let mut game_types: Vec<String> =
                servers.iter().map(|l| l.info.game_type.clone()).collect();
            let mut mission_types: Vec<String> =
                servers.iter().map(|l| l.info.scenario.clone()).collect();
            for list in [&mut game_types, &mut mission_types] {
                list.retain(|t| !t.is_empty());
                list.sort();
                list.dedup();
            }
            self.state.game_types = Some((now, game_types, mission_types));
        }
        let most = self.first_answer_len(from, len);
        let (_, game_types, mission_types) = self.state.game_types.as_ref()?;
        Some(packet::game_types(&header, game_types, mission_types, most))
    }
}

/// Every server a Torque client may see: the Torque servers, and native
/// ones that declare Torque compatibility.
async fn torque_servers<R: Registry>(
    master: &mut Lister<'_, R, TorquePort>,
) -> Option<Vec<Listed>> {
    let max = master.config().max_servers;
    let mut servers = Vec::new();
    for (key, value) in [PROTOCOL_TAG, COMPATIBLE_TAG] {
        let filter = Filter {
            tags: vec![(key.into(), value.into())],
            ..Filter::default()
        };
        servers.extend(master.matching(&filter, max).await?);
    }
    servers.sort_by_key(|l| l.addr);
    Some(servers)
}
