//! The fourth audit's Torque figure, measured the same way before and
//! after (issue 48): the amplification of Torque requests from a forged
//! source.
//!
//! Run: `cargo test --release -p switchboard-torque figures -- --ignored --nocapture`

use super::*;

/// Lists a Torque server at `from` (heartbeat, info request, response).
async fn torque_register(master: &mut TorqueMaster, from: SocketAddr, game: &str) {
    let now = Instant::now();
    let Some((_, request)) = master
        .on_port_datagram(from, &header(22, 0, 0, 7), now)
        .await
    else {
        return;
    };
    let mut out = request[..6].to_vec();
    out[0] = 12;
    out.extend(cstring(game));
    out.extend(cstring("DM"));
    out.push(16);
    out.extend_from_slice(&2u32.to_le_bytes());
    out.extend_from_slice(&1_500u32.to_le_bytes());
    out.push(1);
    out.push(0);
    out.extend_from_slice(&2_400u32.to_le_bytes());
    out.push(0);
    master.on_port_datagram(from, &out, now).await;
}

#[tokio::test]
#[ignore = "figures for docs/SECURITY.md; run with --ignored --nocapture"]
async fn figures_torque_reflection() {
    let config = MasterConfig {
        max_servers_per_address: 100_000,
        heartbeat_burst: 100_000.0,
        ..MasterConfig::default()
    };
    let mut master = torque_master(config, TorqueConfig::default());
    for i in 0..1000u32 {
        let from = SocketAddr::from(([10, 1, (i / 250) as u8, (i % 250) as u8], 28000));
        torque_register(&mut master, from, &format!("game{}", i % 300)).await;
    }
    let now = Instant::now();
    let mut victim = 0u8;
    let factor = |master_out: Option<(SocketAddr, Vec<u8>)>, asked: usize| {
        master_out.map_or(0.0, |(_, reply)| reply.len() as f64 / asked as f64)
    };
    let mut run = |bytes: Vec<u8>| {
        victim += 1;
        (SocketAddr::from(([192, 0, 2, victim], 5000)), bytes)
    };
    let (to, list) = run({
        let mut out = header(6, 0, 1, 0x42);
        out.push(255);
        out.extend(cstring(""));
        out.extend(cstring("any"));
        out.extend([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out
    });
    let list_factor = factor(master.on_port_datagram(to, &list, now).await, list.len());
    let (to, types) = run(header(2, 0, 1, 0x43));
    let types_factor = factor(master.on_port_datagram(to, &types, now).await, types.len());
    let (to, mut never) = run(header(6, 0, 7, 0x99));
    never.push(0);
    let never_factor = factor(master.on_port_datagram(to, &never, now).await, never.len());
    // Sessions a forger opens and then re-requests: bytes out per byte in,
    // over every address of one /24.
    let (mut sent, mut asked) = (0usize, 0usize);
    for host in 1..=254u8 {
        let target = SocketAddr::from(([203, 0, 113, host], 5000));
        for index in 0..=30u8 {
            let mut packet = list.clone();
            if index > 0 {
                packet = header(6, 0, u16::from(index), 0x42);
                packet.push(index % 5);
                packet.extend([0u8; 18]);
            }
            asked += packet.len();
            if let Some((_, reply)) = master.on_port_datagram(target, &packet, now).await {
                sent += reply.len();
            }
        }
    }
    println!(
        "FIGURE torque: 1,000 servers; from a forged source: list request {}x ({} B), game types {}x ({} B), re-request of a session never opened {}x; re-requests over a /24: {} B out for {} B in ({:.1}x)",
        list_factor as u32,
        list.len(),
        types_factor as u32,
        types.len(),
        never_factor as u32,
        sent,
        asked,
        sent as f64 / asked as f64
    );
}
