//! The Torque side in memory: packets byte for byte, built here from the
//! layouts of `docs/TORQUE.md` (not from the encoder under test), and the
//! master's answers to them.

use std::net::{Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use super::packet::{self, Header, Packet, TorqueError, TorqueFilter};
use super::*;
use switchboard_master::protocol::{Filter, ListRequest, Listed, MAX_PAGE};
use switchboard_master::{Limits, Master, MasterConfig, MemoryRegistry, Registry};

/// A master in memory with the Torque port.
type TorqueMaster = Master<MemoryRegistry, TorquePort>;

fn torque_master(config: MasterConfig, torque: TorqueConfig) -> TorqueMaster {
    Master::with_port(config, MemoryRegistry::default(), move |master| {
        TorquePort::new(torque, master)
    })
}

/// The Torque port's counters.
fn torque_stats(master: &TorqueMaster) -> TorqueStats {
    master.port().expect("a Torque port").stats().clone()
}

fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], port))
}

fn header(kind: u8, flags: u8, key: u16, session: u16) -> Vec<u8> {
    let mut out = vec![kind, flags];
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&session.to_le_bytes());
    out
}

fn cstring(text: &str) -> Vec<u8> {
    let mut out = vec![text.len() as u8];
    out.extend_from_slice(text.as_bytes());
    out
}

/// A master info response (12) as TGE writes it: the GUIDs after the
/// player count come from a counter the engine bumps twice (quirk 1), so
/// there are fewer than the count says.
fn info_response(k: u32, game: &str, mission: &str, players: u8, flags: u8) -> Vec<u8> {
    let mut out = header(12, 0, k as u16, (k >> 16) as u16);
    out.extend(cstring(game));
    out.extend(cstring(mission));
    out.push(16); // max players
    out.extend_from_slice(&2u32.to_le_bytes()); // region mask
    out.extend_from_slice(&1_500u32.to_le_bytes()); // version
    out.push(flags);
    out.push(1); // bots
    out.extend_from_slice(&2_400u32.to_le_bytes()); // cpu MHz, u32 here
    out.push(players);
    for guid in 0..players.div_ceil(2) {
        out.extend_from_slice(&(1000 + u32::from(guid)).to_le_bytes());
    }
    out
}

/// An initial list request (6, index 255) with filters and buddies.
fn list_request(flags: u8, key: u16, session: u16, game: &str, max_players: u8) -> Vec<u8> {
    let mut out = header(6, flags, key, session);
    out.push(255);
    out.extend(cstring(game));
    out.extend(cstring("any"));
    out.push(0); // min players
    out.push(max_players);
    out.extend_from_slice(&0u32.to_le_bytes()); // region mask
    out.extend_from_slice(&0u32.to_le_bytes()); // version
    out.push(0); // filter flags
    out.push(0); // max bots
    out.extend_from_slice(&0u16.to_le_bytes()); // min CPU, u16 here
    out.push(1); // one buddy
    out.extend_from_slice(&77u32.to_le_bytes());
    out
}

/// The zeroed filters a re-request carries.
fn zeroed_filters() -> Vec<u8> {
    vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
}

fn master() -> TorqueMaster {
    torque_master(MasterConfig::default(), TorqueConfig::default())
}

/// Heartbeat, info request, info response: the K the master chose.
async fn register(master: &mut TorqueMaster, from: SocketAddr, game: &str, now: Instant) -> u32 {
    let (to, request) = master
        .on_port_datagram(from, &header(22, 0, 0, 0x0777), now)
        .await
        .expect("an info request");
    assert_eq!(to, from, "to the heartbeat's source");
    assert_eq!((request.len(), request[0], request[1]), (6, 10, 0));
    let k = u32::from_le_bytes([request[2], request[3], request[4], request[5]]);
    assert!(master
        .on_port_datagram(from, &info_response(k, game, "DM", 3, 1), now)
        .await
        .is_none());
    k
}

async fn native_list(master: &mut TorqueMaster) -> Vec<Listed> {
    let request = ListRequest {
        filter: Filter::default(),
        page: 0,
        page_size: MAX_PAGE,
    };
    master.list(&request).await.unwrap().servers
}

#[tokio::test]
async fn a_torque_server_is_listed_only_after_answering_its_key_and_shows_in_the_native_list() {
    let t0 = Instant::now();
    let mut master = master();
    let server = addr(1, 28000);
    let (_, request) = master
        .on_port_datagram(server, &header(22, 0, 0, 5), t0)
        .await
        .unwrap();
    let k = u32::from_le_bytes([request[2], request[3], request[4], request[5]]);
    // The wrong key, or the right one from elsewhere: nothing listed.
    master
        .on_port_datagram(server, &info_response(k ^ 1, "FPS", "DM", 3, 0), t0)
        .await;
    master
        .on_port_datagram(addr(2, 28000), &info_response(k, "FPS", "DM", 3, 0), t0)
        .await;
    assert!(native_list(&mut master).await.is_empty());
    assert_eq!(torque_stats(&master).unsolicited, 1);
    assert_eq!(torque_stats(&master).wrong_keys, 1);
    master
        .on_port_datagram(server, &info_response(k, "FPS", "DM", 3, 1), t0)
        .await;
    let listed = native_list(&mut master).await;
    assert_eq!(listed.len(), 1);
    let info = &listed[0].info;
    assert_eq!(
        (
            info.game_type.as_str(),
            info.scenario.as_str(),
            info.players,
            info.max_players
        ),
        ("FPS", "DM", 3, 16)
    );
    assert!(info.dedicated && !info.password);
    assert!(
        info.tags.contains(&("protocol".into(), "torque".into())),
        "{:?}",
        info.tags
    );
    assert_eq!(torque_stats(&master).registered, 1);
}

#[tokio::test]
async fn a_list_request_gets_page_zero_and_re_requests_with_zeroed_filters_get_the_same_query() {
    let t0 = Instant::now();
    let config = MasterConfig {
        max_servers_per_address: 1000,
        heartbeat_burst: 1000.0,
        ..MasterConfig::default()
    };
    let mut master = torque_master(config, TorqueConfig::default());
    for i in 0..300u16 {
        let from = SocketAddr::from(([10, 0, (i / 200) as u8, (i % 200) as u8], 28000));
        register(
            &mut master,
            from,
            if i % 3 == 0 { "RTS" } else { "FPS" },
            t0,
        )
        .await;
    }
    let client = addr(99, 5000);
    let count = |page: &[u8]| u16::from_le_bytes([page[8], page[9]]) as usize;
    let re_request = |key: u16, session: u16, index: u8| {
        let mut again = header(6, 0, key, session);
        again.push(index);
        again.extend(zeroed_filters());
        again
    };
    // 200 FPS servers. A client not yet proven: page 0 within four times
    // the request, the rest on the page it re-requests.
    let request = list_request(0, 0x11, 0x22, "fps", 0);
    let (to, first) = master.on_port_datagram(client, &request, t0).await.unwrap();
    assert_eq!(to, client);
    assert_eq!(
        &first[..6],
        &header(8, 0, 0x11, 0x22)[..],
        "flags and K echoed"
    );
    assert!(first.len() <= 4 * request.len(), "{} bytes", first.len());
    assert_eq!((first[6], first[7]), (0, 2));
    let (_, rest) = master
        .on_port_datagram(client, &re_request(0x98, 0x22, 1), t0)
        .await
        .unwrap();
    assert_eq!(count(&first) + count(&rest), 200);
    // Proven now (it asked again in its session): full pages. All 300
    // (game type "any"): two pages; only page 0 comes back.
    let (_, first) = master
        .on_port_datagram(client, &list_request(0, 0x12, 0x23, "any", 0), t0)
        .await
        .unwrap();
    assert_eq!((first[6], first[7]), (0, 2));
    assert!(count(&first) > 200);
    // Page 1 re-requested with a new key and zeroed filters: from the cache.
    let (_, second) = master
        .on_port_datagram(client, &re_request(0x99, 0x23, 1), t0)
        .await
        .unwrap();
    assert_eq!(&second[..6], &header(8, 0, 0x99, 0x23)[..]);
    assert_eq!((second[6], second[7]), (1, 2));
    assert_eq!(count(&first) + count(&second), 300);
    // Another session of the same client has no cached query.
    let mut stranger = header(6, 0, 0x99, 0x55);
    stranger.push(1);
    assert!(master
        .on_port_datagram(client, &stranger, t0)
        .await
        .is_none());
    assert_eq!(torque_stats(&master).cache_misses, 1);
}

#[tokio::test]
async fn torque3d_asks_with_flag_4_and_gets_type_40_pages_and_44_re_requests() {
    let t0 = Instant::now();
    let mut master = master();
    register(&mut master, addr(1, 28000), "FPS", t0).await;
    let client = addr(99, 5000);
    let (_, page) = master
        .on_port_datagram(client, &list_request(4, 1, 2, "", 0), t0)
        .await
        .unwrap();
    let mut expected = header(40, 4, 1, 2);
    expected.extend_from_slice(&[0, 0, 1, 0, 1, 0, 0, 10, 0, 0, 1, 0x60, 0x6D]);
    assert_eq!(page, expected);
    let mut again = header(44, 0, 3, 2);
    again.push(0);
    again.extend(zeroed_filters());
    let (_, page) = master.on_port_datagram(client, &again, t0).await.unwrap();
    assert_eq!(page[0], 40, "a 44 is answered with a 40");
    assert_eq!(&page[2..6], &header(0, 0, 3, 2)[2..6]);
}

#[tokio::test]
async fn the_master_filters_and_answers_game_types_from_what_servers_reported() {
    let t0 = Instant::now();
    let mut master = master();
    register(&mut master, addr(1, 28000), "FPS", t0).await;
    register(&mut master, addr(2, 28000), "RTS", t0).await;
    let client = addr(99, 5000);
    // Two players at most: both servers have three.
    let (_, page) = master
        .on_port_datagram(client, &list_request(0, 1, 1, "any", 2), t0)
        .await
        .unwrap();
    assert_eq!(u16::from_le_bytes([page[8], page[9]]), 0);
    let (_, types) = master
        .on_port_datagram(client, &header(2, 0, 5, 6), t0)
        .await
        .unwrap();
    let mut expected = header(4, 0, 5, 6);
    expected.push(2);
    expected.extend(cstring("FPS"));
    expected.extend(cstring("RTS"));
    expected.push(1);
    expected.extend(cstring("DM"));
    assert_eq!(types, expected);
}

#[tokio::test]
async fn torque_servers_live_180_seconds_and_native_ones_20() {
    let t0 = Instant::now();
    let mut master = master();
    register(&mut master, addr(1, 28000), "FPS", t0).await;
    master.tick(t0 + Duration::from_secs(60)).await;
    assert_eq!(
        native_list(&mut master).await.len(),
        1,
        "past the native expiry"
    );
    master.tick(t0 + Duration::from_secs(179)).await;
    assert_eq!(native_list(&mut master).await.len(), 1);
    master.tick(t0 + Duration::from_secs(181)).await;
    assert!(
        native_list(&mut master).await.is_empty(),
        "silent past 180 s"
    );
}

#[tokio::test]
async fn torque_heartbeat_flood_draws_a_bounded_number_of_info_requests() {
    let t0 = Instant::now();
    let mut master = master();
    let victim = addr(7, 28000);
    let mut requests = 0;
    for i in 0..10_000u32 {
        let now = t0 + Duration::from_millis(u64::from(i));
        requests += master
            .on_port_datagram(victim, &header(22, 0, 0, 1), now)
            .await
            .is_some() as u32;
    }
    // Ten seconds of flood: the burst, then 30 a minute.
    let burst = MasterConfig::default().heartbeat_burst as u32;
    assert!(requests <= burst + 6, "{requests} info requests");
    assert_eq!(
        torque_stats(&master).rate_limited,
        u64::from(10_000 - requests)
    );
}

#[tokio::test]
async fn native_servers_reach_torque_clients_only_when_they_declare_it() {
    let t0 = Instant::now();
    let mut master = master();
    for (last, tags) in [
        (1u8, vec![]),
        (2, vec![("torque".to_string(), "compatible".to_string())]),
    ] {
        let info = ServerInfo {
            name: "native".into(),
            game_type: "FPS".into(),
            max_players: 8,
            tags,
            ..ServerInfo::default()
        };
        let config = MasterConfig::default();
        let limits = Limits {
            max_servers: config.max_servers,
            max_servers_per_address: config.max_servers_per_address,
            expiry: config.expiry,
            grace: Duration::ZERO,
        };
        master
            .registry_mut()
            .upsert(addr(last, 7000), info, t0, limits)
            .await
            .unwrap();
    }
    let (_, page) = master
        .on_port_datagram(addr(99, 1), &list_request(0, 1, 1, "any", 0), t0)
        .await
        .unwrap();
    assert_eq!(u16::from_le_bytes([page[8], page[9]]), 1);
    assert_eq!(&page[10..14], &[10, 0, 0, 2], "only the compatible one");
}

mod abuse;
mod figures;
mod packets;

#[tokio::test]
async fn the_torque_counters_reach_the_masters_stats_and_admin_page_by_name() {
    let t0 = Instant::now();
    let mut master = master();
    register(&mut master, addr(1, 28000), "FPS", t0).await;
    let stats = master.stats();
    let count = |name: &str| stats.port.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    assert_eq!(count("switchboard_master_torque_heartbeats_total"), Some(1));
    assert_eq!(count("switchboard_master_torque_registered_total"), Some(1));
    assert_eq!(count("switchboard_master_torque_datagrams_total"), Some(2));
    assert_eq!(stats.listed, 1);
    let counters = master.port_counters();
    assert_eq!(counters.len(), stats.port.len());
    assert!(counters.iter().all(|c| !c.help.is_empty()));
    // A master without the port has none.
    let native = Master::new(MasterConfig::default(), MemoryRegistry::default());
    assert!(native.stats().port.is_empty());
}
