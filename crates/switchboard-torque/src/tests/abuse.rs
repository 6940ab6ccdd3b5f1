//! The fourth audit's attacks on the Torque port (issue 48): key
//! guessing, reflection from a forged source, a cache flooded from a few
//! addresses. Named after the attack.

use super::*;

/// A master with `n` Torque servers listed (game type FPS).
async fn master_with(n: u16, config: MasterConfig, torque: TorqueConfig) -> TorqueMaster {
    let t0 = Instant::now();
    let config = MasterConfig {
        max_servers_per_address: usize::MAX,
        heartbeats_per_minute_per_address: 1e9,
        ..config
    };
    let mut master = torque_master(config, torque);
    for i in 0..n {
        let from = SocketAddr::from(([10, 1, (i / 250) as u8, (i % 250) as u8], 28000));
        register(&mut master, from, "FPS", t0).await;
    }
    master
}

#[tokio::test]
async fn torque_key_guessing_ends_after_three_wrong_keys_and_the_address_backs_off() {
    // The audit: 16 random bits, wrong answers never limited: a victim's
    // address listed after at most 57,856 forged guesses.
    let t0 = Instant::now();
    let mut master = master();
    let victim = addr(1, 28000);
    let (_, request) = master
        .on_port_datagram(victim, &header(22, 0, 0, 5), t0)
        .await
        .unwrap();
    let k = u32::from_le_bytes([request[2], request[3], request[4], request[5]]);
    for guess in 1..=1000u32 {
        master
            .on_port_datagram(victim, &info_response(k ^ guess, "FPS", "DM", 3, 0), t0)
            .await;
    }
    // Even the right key no longer lists it: the challenge is gone.
    master
        .on_port_datagram(victim, &info_response(k, "FPS", "DM", 3, 0), t0)
        .await;
    assert!(native_list(&mut master).await.is_empty());
    let stats = torque_stats(&master);
    assert_eq!(stats.wrong_keys, 3);
    assert_eq!(stats.unsolicited, 998);
    // The address gets no new challenge during the back-off, then one.
    let later = t0 + Duration::from_secs(5);
    assert!(master
        .on_port_datagram(victim, &header(22, 0, 0, 5), later)
        .await
        .is_none());
    assert_eq!(torque_stats(&master).backed_off, 1);
    let after = t0 + TorqueConfig::default().wrong_key_backoff + Duration::from_secs(1);
    master.tick(after).await;
    assert!(master
        .on_port_datagram(victim, &header(22, 0, 0, 5), after)
        .await
        .is_some());
}

#[tokio::test]
async fn torque_reflection_from_a_forged_source_stays_within_a_few_times_the_request() {
    // The audit: a 23-byte list request drew 1,396 bytes (61x), a 6-byte
    // game types request 1,288 (215x), a re-request of a session never
    // opened 1,396 (199x).
    let t0 = Instant::now();
    let mut master = master_with(1000, MasterConfig::default(), TorqueConfig::default()).await;
    let victim = addr(200, 5000);
    let request = list_request(0, 1, 0x42, "", 0);
    let (_, page) = master.on_port_datagram(victim, &request, t0).await.unwrap();
    assert!(page.len() <= 4 * request.len(), "{} bytes", page.len());
    let types = header(2, 0, 1, 0x43);
    if let Some((_, reply)) = master.on_port_datagram(victim, &types, t0).await {
        assert!(reply.len() <= 2 * packet::HEADER_LEN + 6 * types.len());
    }
    // A page of a session that address never opened: nothing.
    let mut never = header(6, 0, 7, 0x99);
    never.push(1);
    assert!(master.on_port_datagram(victim, &never, t0).await.is_none());
    // Re-requests of sessions the forger opened (it chose them) from every
    // address of the victim's /24: each address within its request rate,
    // the prefix within its bytes per second.
    let (mut sent, mut asked) = (0usize, 0usize);
    for host in 1..=254u8 {
        let target = SocketAddr::from(([203, 0, 113, host], 5000));
        for index in 0..=30u8 {
            let mut packet = list_request(0, 1, 0x42, "", 0);
            if index > 0 {
                packet = header(6, 0, u16::from(index), 0x42);
                packet.push(index % 5);
                packet.extend(zeroed_filters());
            }
            asked += packet.len();
            if let Some((_, reply)) = master.on_port_datagram(target, &packet, t0).await {
                sent += reply.len();
            }
        }
    }
    let prefix_burst = 4 * TorqueConfig::default().bytes_per_second_per_prefix;
    assert!(sent <= prefix_burst, "{sent} bytes for {asked}");
    assert!(torque_stats(&master).bytes_refused > 0);
}

#[tokio::test]
async fn torque_list_requests_from_one_address_cannot_evict_anothers_cached_query() {
    // The audit: ten list requests (230 bytes) evicted every cached query;
    // 0 of 8 honest listings got past page 0.
    let t0 = Instant::now();
    let torque = TorqueConfig {
        cached_addresses: 12_000,
        lists_per_minute: 1e6,
        bytes_per_second_per_address: 1 << 30,
        bytes_per_second_per_prefix: 1 << 30,
        bytes_per_second: 1 << 30,
        ..TorqueConfig::default()
    };
    let mut master = master_with(1000, MasterConfig::default(), torque).await;
    let honest: Vec<SocketAddr> = (0..8).map(|i| addr(100 + i, 5000)).collect();
    for (i, client) in honest.iter().enumerate() {
        master
            .on_port_datagram(*client, &list_request(0, 1, i as u16, "", 0), t0)
            .await
            .unwrap();
    }
    // Five addresses, 100 list requests each.
    for n in 0..500u16 {
        let flooder = SocketAddr::from(([198, 51, 100, (n % 5) as u8], 6000));
        master
            .on_port_datagram(flooder, &list_request(0, 1, n, "", 0), t0)
            .await;
    }
    for (i, client) in honest.iter().enumerate() {
        let mut again = header(6, 0, 9, i as u16);
        again.push(1);
        again.extend(zeroed_filters());
        assert!(
            master.on_port_datagram(*client, &again, t0).await.is_some(),
            "honest client {i} still gets page 1"
        );
    }
}
