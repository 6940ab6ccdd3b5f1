//! Torque games on the master (`docs/TORQUE.md`): unmodified TGE 1.5.2,
//! TGEA 1.7 and Torque3D servers heartbeat to the master's Torque port and
//! are listed, after answering an info request under a fresh key, in the
//! same registry as native servers (tagged `protocol=torque`); Torque
//! clients get them in the engine's list pages.
//!
//! ```text
//!  game server ──22 heartbeat──▶ master ──10 info request (fresh K, to the observed address)──▶ game server
//!  game server ──12 info response (that K)──▶ master                       (listed from now on)
//!  client ──6 list request (index 255, filters)──▶ master ──8 (or 40) page 0 of N──▶ client
//!  client ──6 or 44 re-request of page i (new key, zeroed filters)──▶ master ──page i (from the cached query)──▶ client
//! ```
//!
//! Safety as the native side: replies go only to the address a packet came
//! from; heartbeats and list requests are rate-limited per IP; an info
//! request is no longer than the heartbeat that earned it; a list request
//! gets one page, never more; the registry, the unanswered requests and the
//! cached queries are bounded.

mod cache;
pub mod packet;

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use cache::QueryCache;
use packet::{server_flags, Header, Packet, TorqueFilter, TorqueInfo};
use switchboard::session::{KeyedLimiter, RateLimit};

use crate::master::Master;
use crate::pending::Pending;
use crate::protocol::{Filter, Listed, ServerInfo};
use crate::registry::{Heard, Registry, Upserted};
use crate::MasterConfig;

/// The tag a Torque server is listed with (in the list API and the native
/// browser): `protocol` = `torque`.
pub const PROTOCOL_TAG: (&str, &str) = ("protocol", "torque");
/// The tag a native server sets to be listed to Torque clients too:
/// `torque` = `compatible`. Native servers without it never are.
pub const COMPATIBLE_TAG: (&str, &str) = ("torque", "compatible");
/// The engine's customary master port.
pub const CUSTOMARY_PORT: u16 = 28002;

/// The Torque side's state: requests out, rate limits, cached queries.
pub(crate) struct TorqueState {
    pending: Pending,
    heartbeats: KeyedLimiter<IpAddr>,
    lists: KeyedLimiter<IpAddr>,
    cache: QueryCache,
}

impl TorqueState {
    pub(crate) fn new(config: &MasterConfig) -> Self {
        let per_minute = |n: f64, burst: f64| RateLimit {
            per_second: n / 60.0,
            burst,
        };
        Self {
            pending: Pending::new(config.max_pending, config.max_pending_per_ip),
            heartbeats: KeyedLimiter::with_max_keys(
                per_minute(config.torque_heartbeats_per_minute, config.heartbeat_burst),
                config.max_limited_addresses,
            ),
            lists: KeyedLimiter::with_max_keys(
                per_minute(
                    config.torque_lists_per_minute,
                    config.torque_lists_per_minute / 4.0,
                ),
                config.max_limited_addresses,
            ),
            cache: QueryCache::new(config.torque_cached_addresses),
        }
    }

    pub(crate) fn tick(&mut self, now: Instant, config: &MasterConfig) {
        self.pending.expire(now, config.query_timeout);
        self.cache.expire(now, config.torque_query_ttl);
        self.heartbeats.forget_idle(now, Duration::from_secs(600));
        self.lists.forget_idle(now, Duration::from_secs(600));
    }
}

/// A Torque server's info as the registry keeps it: game type, mission
/// type (as the scenario), players, bots, flags, the region mask and the
/// version as numbers in text, the CPU in a tag.
pub fn server_info(info: &TorqueInfo) -> ServerInfo {
    let players = u16::from(info.players);
    let max_players = u16::from(info.max_players).max(players);
    let mut tags = vec![(PROTOCOL_TAG.0.into(), PROTOCOL_TAG.1.into())];
    tags.push(("cpu_mhz".into(), info.cpu_mhz.to_string()));
    if info.flags & server_flags::LINUX != 0 {
        tags.push(("os".into(), "linux".into()));
    }
    if info.flags & server_flags::XENON != 0 {
        tags.push(("platform".into(), "xenon".into()));
    }
    let clip = |text: &str| {
        let mut end = text.len().min(crate::protocol::MAX_TEXT);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].to_string()
    };
    ServerInfo {
        // The engine's master info has no name: a browser asks the server.
        name: String::new(),
        game_type: clip(&info.game_type),
        scenario: clip(&info.mission_type),
        players,
        max_players,
        bots: u16::from(info.bots).min(players),
        password: info.flags & server_flags::PASSWORDED != 0,
        dedicated: info.flags & server_flags::DEDICATED != 0,
        version: info.version.to_string(),
        region: info.region_mask.to_string(),
        tags,
    }
}

fn tag<'a>(info: &'a ServerInfo, key: &str) -> Option<&'a str> {
    info.tags
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Whether a server passes a Torque list request's filters, as the engine's
/// client would re-filter it: game and mission type ("any" or empty for
/// all, case-insensitive), players, bots, CPU, dedicated, not passworded,
/// Linux, not Xenon, the version, the region mask.
pub fn matches(filter: &TorqueFilter, info: &ServerInfo) -> bool {
    let kind = |want: &str, have: &str| {
        want.is_empty() || want.eq_ignore_ascii_case("any") || want.eq_ignore_ascii_case(have)
    };
    let number = |text: &str| text.parse::<u32>().unwrap_or(0);
    let flag = |bit: u8| filter.flags & bit != 0;
    let cpu = tag(info, "cpu_mhz").map_or(0, number);
    kind(&filter.game_type, &info.game_type)
        && kind(&filter.mission_type, &info.scenario)
        && info.players >= u16::from(filter.min_players)
        && (filter.max_players == 0 || info.players <= u16::from(filter.max_players))
        && (filter.max_bots == 0 || info.bots <= u16::from(filter.max_bots))
        && cpu >= u32::from(filter.min_cpu)
        && (!flag(server_flags::DEDICATED) || info.dedicated)
        && (!flag(server_flags::PASSWORDED) || !info.password)
        && (!flag(server_flags::LINUX) || tag(info, "os") == Some("linux"))
        && (!flag(server_flags::XENON) || tag(info, "platform") != Some("xenon"))
        && (!flag(server_flags::CURRENT_VERSION) || number(&info.version) == filter.version)
        && (filter.region_mask == 0 || number(&info.region) & filter.region_mask != 0)
}

impl<R: Registry> Master<R> {
    /// Handles one datagram on the Torque port from `from`; returns the one
    /// datagram to send back (always to `from`), if any.
    pub async fn on_torque_datagram(
        &mut self,
        from: SocketAddr,
        bytes: &[u8],
        now: Instant,
    ) -> Option<(SocketAddr, Vec<u8>)> {
        self.stats.torque_datagrams += 1;
        let packet = match packet::parse(bytes) {
            Ok(packet) => packet,
            Err(err) => {
                self.stats.torque_dropped += 1;
                tracing::debug!(%from, %err, "Torque packet dropped");
                return None;
            }
        };
        let reply = match packet {
            Packet::Heartbeat(header) => self.torque_heartbeat(from, header, now).await,
            Packet::InfoResponse(header, info) => {
                self.torque_info(from, header, &info, now).await;
                None
            }
            Packet::ListRequest(header, filter) => {
                self.torque_list(from, header, &filter, now).await
            }
            Packet::PageRequest(header, index) => self.torque_page(from, header, index, now),
            Packet::GameTypesRequest(header) => self.torque_game_types(from, header, now).await,
        };
        reply.map(|bytes| (from, bytes))
    }

    /// A heartbeat: refreshes a listed server, and asks it (again) for its
    /// info under a fresh key, within the rate.
    async fn torque_heartbeat(
        &mut self,
        from: SocketAddr,
        header: Header,
        now: Instant,
    ) -> Option<Vec<u8>> {
        self.stats.torque_heartbeats += 1;
        if !self.torque.heartbeats.allow(from.ip(), now) {
            self.stats.torque_rate_limited += 1;
            return None;
        }
        let heard = self
            .registry
            .heartbeat(from, now, self.torque_limits())
            .await;
        match self.checked(heard)? {
            Heard::Listed | Heard::New => {}
            Heard::Full => {
                self.stats.refused_full += 1;
                return None;
            }
            Heard::IpFull => {
                self.stats.refused_per_ip += 1;
                return None;
            }
        }
        let mut key = [0u8; 4];
        getrandom::fill(&mut key).expect("the OS random source failed");
        // The session half echoes the heartbeat's; the key half is fresh.
        let k = (u32::from(header.session) << 16) | u32::from(u16::from_le_bytes([key[0], key[1]]));
        match self.torque.pending.insert(from, u64::from(k), now) {
            Ok(true) => self.stats.challenges_evicted += 1,
            Ok(false) => {}
            Err(_) => {
                self.stats.refused_per_ip += 1;
                return None;
            }
        }
        // 6 bytes for 6 bytes: nothing to amplify.
        Some(packet::info_request(k))
    }

    /// An info response: lists the server if it answers our request (its
    /// address and K).
    async fn torque_info(
        &mut self,
        from: SocketAddr,
        header: Header,
        info: &TorqueInfo,
        now: Instant,
    ) {
        if self.torque.pending.get(from) != Some(u64::from(header.k())) {
            self.stats.torque_unsolicited += 1;
            return;
        }
        self.torque.pending.remove(from);
        let info = server_info(info);
        if info.check().is_err() {
            self.stats.torque_dropped += 1;
            return;
        }
        let upserted = self
            .registry
            .upsert(from, info, now, self.torque_limits())
            .await;
        match self.checked(upserted) {
            Some(Upserted::Added) => {
                self.stats.torque_registered += 1;
                tracing::info!(%from, "Torque server listed");
            }
            Some(Upserted::Refreshed) | None => {}
            Some(Upserted::Full) => self.stats.refused_full += 1,
            Some(Upserted::IpFull) => self.stats.refused_per_ip += 1,
        }
    }

    /// Whether a list request from `from` is within its rate (counted when
    /// not).
    fn torque_list_allowed(&mut self, from: SocketAddr, now: Instant) -> bool {
        let allowed = self.torque.lists.allow(from.ip(), now);
        if !allowed {
            self.stats.torque_lists_refused += 1;
        }
        allowed
    }

    /// An initial list request: the matching servers, cut into pages and
    /// kept for the client's re-requests; page 0 goes back now.
    async fn torque_list(
        &mut self,
        from: SocketAddr,
        header: Header,
        filter: &TorqueFilter,
        now: Instant,
    ) -> Option<Vec<u8>> {
        if !self.torque_list_allowed(from, now) {
            return None;
        }
        self.stats.torque_lists += 1;
        let servers = self.torque_servers().await?;
        let addrs: Vec<SocketAddr> = servers
            .iter()
            .filter(|l| matches(filter, &l.info))
            .map(|l| l.addr)
            .collect();
        let new_style = header.flags & packet::query_flags::NEW_STYLE_RESPONSE != 0;
        let pages = packet::paginate(&addrs, new_style);
        let first = packet::list_page(&header, 0, pages.len(), &pages[0]);
        self.torque
            .cache
            .insert((from, header.session), pages, new_style, now);
        self.stats.torque_pages += 1;
        Some(first)
    }

    /// A re-request of one page (new key, zeroed filters): served from the
    /// query cached for this client and session.
    fn torque_page(
        &mut self,
        from: SocketAddr,
        header: Header,
        index: u8,
        now: Instant,
    ) -> Option<Vec<u8>> {
        if !self.torque_list_allowed(from, now) {
            return None;
        }
        let Some(cached) = self.torque.cache.get((from, header.session)) else {
            self.stats.torque_cache_misses += 1;
            return None;
        };
        let page = cached.pages.get(usize::from(index))?;
        // Torque3D's re-request (44) is answered in its own form (40).
        let mut header = header;
        if cached.new_style || header.kind == packet::kind::EXTENDED_LIST_REREQUEST {
            header.flags |= packet::query_flags::NEW_STYLE_RESPONSE;
        }
        let reply = packet::list_page(&header, usize::from(index), cached.pages.len(), page);
        self.stats.torque_pages += 1;
        Some(reply)
    }

    /// The game and mission types the listed Torque servers reported.
    async fn torque_game_types(
        &mut self,
        from: SocketAddr,
        header: Header,
        now: Instant,
    ) -> Option<Vec<u8>> {
        if !self.torque_list_allowed(from, now) {
            return None;
        }
        let servers = self.torque_servers().await?;
        let mut game_types: Vec<String> =
            servers.iter().map(|l| l.info.game_type.clone()).collect();
        let mut mission_types: Vec<String> =
            servers.iter().map(|l| l.info.scenario.clone()).collect();
        for list in [&mut game_types, &mut mission_types] {
            list.retain(|t| !t.is_empty());
            list.sort();
            list.dedup();
        }
        Some(packet::game_types(&header, &game_types, &mission_types))
    }

    /// Every server a Torque client may see: the Torque servers, and native
    /// ones that declare Torque compatibility.
    async fn torque_servers(&mut self) -> Option<Vec<Listed>> {
        let max = self.config.max_servers;
        let mut servers = Vec::new();
        for (key, value) in [PROTOCOL_TAG, COMPATIBLE_TAG] {
            let filter = Filter {
                tags: vec![(key.into(), value.into())],
                ..Filter::default()
            };
            let found = self.registry.matching(&filter, max).await;
            servers.extend(self.checked(found)?);
        }
        servers.sort_by_key(|l| l.addr);
        Some(servers)
    }

    /// A Torque server lives `torque_expiry` (180 s, above the engine's
    /// 120 s heartbeat), the native ones `expiry`.
    fn torque_limits(&self) -> crate::registry::Limits {
        crate::registry::Limits {
            grace: self.config.torque_expiry.saturating_sub(self.config.expiry),
            ..self.registry_limits()
        }
    }
}

#[cfg(test)]
mod tests;
