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
mod state;

use std::net::SocketAddr;
use std::time::Instant;

use packet::{server_flags, Header, Packet, TorqueFilter, TorqueInfo};
use switchboard::socket::address_key;

use crate::master::Master;
use crate::protocol::{Filter, Listed, ServerInfo};
use crate::registry::{Heard, Registry, Upserted};
pub(crate) use state::TorqueState;

/// The tag a Torque server is listed with (in the list API and the native
/// browser): `protocol` = `torque`.
pub const PROTOCOL_TAG: (&str, &str) = ("protocol", "torque");
/// The tag a native server sets to be listed to Torque clients too:
/// `torque` = `compatible`. Native servers without it never are.
pub const COMPATIBLE_TAG: (&str, &str) = ("torque", "compatible");
/// The engine's customary master port.
pub const CUSTOMARY_PORT: u16 = 28002;

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
            Packet::Heartbeat(_) => self.torque_heartbeat(from, now).await,
            Packet::InfoResponse(header, info) => {
                self.torque_info(from, header, &info, now).await;
                None
            }
            Packet::ListRequest(header, filter) => {
                let reply = self
                    .torque_list(from, header, &filter, bytes.len(), now)
                    .await;
                self.torque_reply(from, reply, now)
            }
            Packet::PageRequest(header, index) => {
                let reply = self.torque_page(from, header, index, now);
                self.torque_reply(from, reply, now)
            }
            Packet::GameTypesRequest(header) => {
                let reply = self.torque_game_types(from, header, bytes.len(), now).await;
                self.torque_reply(from, reply, now)
            }
        };
        reply.map(|bytes| (from, bytes))
    }

    /// A list page or the game types, if the bytes allowed to `to` (its
    /// own, its prefix's, the master's) have room for it; else counted.
    fn torque_reply(
        &mut self,
        to: SocketAddr,
        reply: Option<Vec<u8>>,
        now: Instant,
    ) -> Option<Vec<u8>> {
        let reply = reply?;
        if !self.torque.may_send(to, &reply, now) {
            self.stats.torque_bytes_refused += 1;
            return None;
        }
        self.stats.torque_bytes_sent += reply.len() as u64;
        Some(reply)
    }

    /// The longest first answer to `from` for a request of `len` bytes:
    /// a few times the request, until it has asked again in a session
    /// (a forged source never sees the answer, so it cannot ask again
    /// for a reason of its own; the per-destination bytes bound the rest).
    fn first_answer_len(&self, from: SocketAddr, len: usize) -> usize {
        if self.torque.is_proven(from) {
            packet::MAX_REPLY
        } else {
            let most = self.config.torque_unproven_reply_factor * len as f64;
            (most as usize).clamp(packet::HEADER_LEN + 6, packet::MAX_REPLY)
        }
    }

    /// A heartbeat: refreshes a listed server, and asks it (again) for its
    /// info under a fresh key, within the rate.
    async fn torque_heartbeat(&mut self, from: SocketAddr, now: Instant) -> Option<Vec<u8>> {
        self.stats.torque_heartbeats += 1;
        let allowed = self.torque.heartbeats.allow(from, now)
            && self.torque.heartbeats_ip.allow(address_key(from.ip()), now);
        if !allowed {
            self.stats.torque_rate_limited += 1;
            self.refresh_over_rate(from, now, self.torque_limits())
                .await;
            return None;
        }
        if self.torque.backed_off.contains_key(&from) {
            // Its last challenge drew too many wrong keys.
            self.stats.torque_backed_off += 1;
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
                self.stats.refused_per_address += 1;
                return None;
            }
        }
        // All 32 bits of K are fresh: the engine echoes the whole K of an
        // info request (`handleGameMasterInfoRequest` writes back the key
        // it read), so nothing of it need come from the heartbeat.
        let mut key = [0u8; 4];
        getrandom::fill(&mut key).expect("the OS random source failed");
        let k = u32::from_le_bytes(key);
        match self.torque.pending.insert(from, u64::from(k), now) {
            Ok(true) => self.stats.challenges_evicted += 1,
            Ok(false) => {}
            Err(_) => {
                self.stats.refused_per_address += 1;
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
        match self.torque.pending.get(from) {
            Some(k) if k == u64::from(header.k()) => {}
            Some(_) => {
                self.torque_wrong_key(from, now);
                return;
            }
            None => {
                self.stats.torque_unsolicited += 1;
                return;
            }
        }
        self.torque.pending.remove(from);
        self.torque.wrong_keys.remove(&from);
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
                self.remember_answered(from, u64::from(header.k()));
                tracing::info!(%from, "Torque server listed");
            }
            Some(Upserted::Refreshed) => self.remember_answered(from, u64::from(header.k())),
            None => {}
            Some(Upserted::Full) => self.stats.refused_full += 1,
            Some(Upserted::IpFull) => self.stats.refused_per_address += 1,
        }
    }

    /// An info response from `from` with the wrong key: counted, and past
    /// `torque_max_wrong_keys` its challenge is dropped and the address
    /// gets no new one for `torque_wrong_key_backoff`, so that guessing
    /// the key (32 random bits) ends after a few tries.
    fn torque_wrong_key(&mut self, from: SocketAddr, now: Instant) {
        self.stats.torque_wrong_keys += 1;
        let (wrong, _) = self.torque.wrong_keys.entry(from).or_insert((0, now));
        *wrong += 1;
        if *wrong < self.config.torque_max_wrong_keys {
            return;
        }
        self.torque.wrong_keys.remove(&from);
        self.torque.pending.remove(from);
        if self.torque.backed_off.len() < self.config.max_pending {
            self.torque
                .backed_off
                .insert(from, now + self.config.torque_wrong_key_backoff);
        }
        tracing::info!(%from, "Torque challenge dropped after wrong keys; that address backs off");
    }

    /// Whether a list request from `from` is within its rate (counted when
    /// not).
    fn torque_list_allowed(&mut self, from: SocketAddr, now: Instant) -> bool {
        let allowed = self.torque.lists.allow(address_key(from.ip()), now);
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
        len: usize,
        now: Instant,
    ) -> Option<Vec<u8>> {
        if !self.torque_list_allowed(from, now) {
            return None;
        }
        self.stats.torque_lists += 1;
        if self.torque.cache.get((from, header.session)).is_some() {
            // The same session asking again: a client where it says.
            self.torque
                .prove(from, now, self.config.max_limited_addresses);
        }
        let first_len = self.first_answer_len(from, len);
        let servers = self.torque_servers().await?;
        let addrs: Vec<SocketAddr> = servers
            .iter()
            .filter(|l| matches(filter, &l.info))
            .map(|l| l.addr)
            .collect();
        let new_style = header.flags & packet::query_flags::NEW_STYLE_RESPONSE != 0;
        let pages = packet::paginate(&addrs, new_style, first_len);
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
        if self.torque.cache.get((from, header.session)).is_none() {
            // Only a session this address opened is answered.
            self.stats.torque_cache_misses += 1;
            return None;
        }
        self.torque
            .prove(from, now, self.config.max_limited_addresses);
        let cached = self.torque.cache.get((from, header.session))?;
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

    /// The game and mission types the listed Torque servers reported, read
    /// again once `torque_game_types_cache` old. A client not yet proven
    /// gets what fits a few times its request; the same request again
    /// within the session's life gets them all.
    async fn torque_game_types(
        &mut self,
        from: SocketAddr,
        header: Header,
        len: usize,
        now: Instant,
    ) -> Option<Vec<u8>> {
        if !self.torque_list_allowed(from, now) {
            return None;
        }
        let key = (from, header.session);
        if self.torque.cache.get(key).is_some() {
            self.torque
                .prove(from, now, self.config.max_limited_addresses);
        } else {
            // Remembers the session (no pages) for a second request.
            self.torque.cache.insert(key, Vec::new(), false, now);
        }
        let fresh = self.torque.game_types.as_ref().is_some_and(|(at, _, _)| {
            now.saturating_duration_since(*at) < self.config.torque_game_types_cache
        });
        if !fresh {
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
            self.torque.game_types = Some((now, game_types, mission_types));
        }
        let most = self.first_answer_len(from, len);
        let (_, game_types, mission_types) = self.torque.game_types.as_ref()?;
        Some(packet::game_types(&header, game_types, mission_types, most))
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
