//! Torque games against a real master process (`switchboard-server master
//! --torque-port 0`): simulated Torque game servers (UDP sockets on several
//! loopback addresses that heartbeat and answer the master's info request
//! as the engine does) get listed; a simulated Torque client (a list
//! request, the pages collected, a missing page re-requested with a new key
//! and zeroed filters) reads them all; a flood of forged heartbeats draws a
//! bounded number of info requests; two masters on one Redis list the same
//! Torque servers. Every packet is built here from the layouts of
//! `docs/TORQUE.md`, not with the master's encoder.

use crate::support;

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{wait_until, Proc, BIN};

const WAIT: Duration = Duration::from_secs(15);

/// A master with a Torque port: the process, its TCP/UDP port, its Torque
/// address.
fn master(extra: &[&str]) -> (Proc, u16, SocketAddr) {
    let mut child = Command::new(BIN)
        .args(["master", "--port", "0", "--torque-port", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (mut port, mut torque) = (None, None);
    for line in stdout.lines().map_while(Result::ok) {
        if let Some(p) = line.strip_prefix("SWITCHBOARD READY 1 ") {
            port = p.trim().parse().ok();
        }
        if let Some(rest) = line.strip_prefix("Torque games: udp://") {
            torque = rest.split_whitespace().next().and_then(|a| a.parse().ok());
            break;
        }
    }
    (
        Proc(child),
        port.expect("a ready line"),
        torque.expect("a Torque line"),
    )
}

fn header(kind: u8, flags: u8, key: u16, session: u16) -> Vec<u8> {
    let mut out = vec![kind, flags];
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&session.to_le_bytes());
    out
}

fn socket(ip: Ipv4Addr) -> UdpSocket {
    let socket = UdpSocket::bind((ip, 0)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    socket
}

/// A Torque game server: heartbeats from its socket, answers a master
/// info request (10) with its info (12) under the request's K, GUIDs
/// written as the engine's doubled counter does.
struct GameServer {
    socket: UdpSocket,
    game: &'static str,
}

impl GameServer {
    fn heartbeat(&self, master: SocketAddr) {
        self.socket
            .send_to(&header(22, 0, 0, 0x4242), master)
            .unwrap();
    }

    /// Answers the next info request, if one comes; whether one did.
    fn answer(&self) -> bool {
        let mut buf = [0u8; 64];
        let Ok((len, from)) = self.socket.recv_from(&mut buf) else {
            return false;
        };
        assert_eq!((len, buf[0], buf[1]), (6, 10, 0), "a master info request");
        let mut reply = vec![12, 0];
        reply.extend_from_slice(&buf[2..6]); // K echoed
        reply.push(self.game.len() as u8);
        reply.extend_from_slice(self.game.as_bytes());
        reply.extend_from_slice(&[2, b'D', b'M']);
        reply.push(16); // max players
        reply.extend_from_slice(&1u32.to_le_bytes()); // region mask
        reply.extend_from_slice(&1u32.to_le_bytes()); // version
        reply.push(1); // dedicated
        reply.push(0); // bots
        reply.extend_from_slice(&2000u32.to_le_bytes()); // cpu, u32
        reply.push(4); // players
        reply.extend_from_slice(&[1, 0, 0, 0, 3, 0, 0, 0]); // two GUIDs for four
        self.socket.send_to(&reply, from).unwrap();
        true
    }
}

/// Starts `count` game servers, each on a loopback address of its own
/// (127.1.0.1, 127.1.0.2, ...: Linux routes all of 127/8 to loopback), and
/// has each listed; a heartbeat each is within every address's burst.
fn listed_servers(master: SocketAddr, count: usize, game: &'static str) -> Vec<GameServer> {
    let servers: Vec<GameServer> = (0..count)
        .map(|i| GameServer {
            socket: socket(Ipv4Addr::new(127, 1, (i / 250) as u8, (i % 250) as u8 + 1)),
            game,
        })
        .collect();
    for server in &servers {
        // A heartbeat can meet a full burst of its address: try again.
        let deadline = Instant::now() + WAIT;
        loop {
            server.heartbeat(master);
            if server.answer() {
                break;
            }
            assert!(Instant::now() < deadline, "no info request came");
        }
    }
    servers
}

/// A Torque client's list: an initial request (6, index 255) with the
/// given flags and game type; the pages gathered; each missing page
/// re-requested (6, or 44 for Torque3D) with a new key and zeroed filters
/// until all are in. Returns the addresses and how many re-requests it
/// took.
fn client_list(master: SocketAddr, flags: u8, game: &str) -> (Vec<SocketAddr>, usize) {
    let client = socket(Ipv4Addr::LOCALHOST);
    let session = 0x0BAD;
    let mut request = header(6, flags, 1, session);
    request.push(255);
    request.push(game.len() as u8);
    request.extend_from_slice(game.as_bytes());
    request.extend_from_slice(&[3, b'a', b'n', b'y']);
    request.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    client.send_to(&request, master).unwrap();
    let new_style = flags & 4 != 0;
    let mut pages: Vec<Option<Vec<SocketAddr>>> = Vec::new();
    let (mut key, mut rerequests) = (2u16, 0);
    let deadline = Instant::now() + WAIT;
    loop {
        let mut buf = [0u8; 2048];
        match client.recv_from(&mut buf) {
            Ok((len, _)) => {
                let page = &buf[..len];
                assert_eq!(&page[4..6], &session.to_le_bytes(), "the session echoed");
                let (index, total, count, mut at) = if new_style {
                    assert_eq!(page[0], 40);
                    let u16_at = |i: usize| u16::from_le_bytes([page[i], page[i + 1]]) as usize;
                    (u16_at(6), u16_at(8), u16_at(10), 12)
                } else {
                    assert_eq!(page[0], 8);
                    let count = u16::from_le_bytes([page[8], page[9]]) as usize;
                    (page[6] as usize, page[7] as usize, count, 10)
                };
                assert!(len <= 1400, "a page of {len} bytes");
                let mut addrs = Vec::new();
                for _ in 0..count {
                    if new_style {
                        assert_eq!(page[at], 0, "IPv4");
                        at += 1;
                    }
                    let ip = Ipv4Addr::new(page[at], page[at + 1], page[at + 2], page[at + 3]);
                    let port = u16::from_le_bytes([page[at + 4], page[at + 5]]);
                    addrs.push(SocketAddr::from((ip, port)));
                    at += 6;
                }
                pages.resize(total, None);
                pages[index] = Some(addrs);
            }
            Err(_) if pages.is_empty() => {
                // No page at all (the master could not read its registry
                // yet, say): the request again, as the engine retries a
                // master (2000 ms × 3, shortened).
                client.send_to(&request, master).unwrap();
            }
            Err(_) => {
                // The engine's 1000 ms, shortened: each missing page again,
                // with a new key and zeroed filters.
                for (index, _) in pages.iter().enumerate().filter(|(_, p)| p.is_none()) {
                    let kind = if new_style { 44 } else { 6 };
                    let mut again = header(kind, flags, key, session);
                    again.push(index as u8);
                    again.extend_from_slice(&[0; 18]);
                    client.send_to(&again, master).unwrap();
                    key += 1;
                    rerequests += 1;
                }
            }
        }
        if !pages.is_empty() && pages.iter().all(Option::is_some) {
            return (pages.into_iter().flatten().flatten().collect(), rerequests);
        }
        assert!(Instant::now() < deadline, "pages still missing: {pages:?}");
    }
}

#[test]
fn torque_servers_are_listed_and_a_torque_client_reads_every_page_re_requesting_the_missing_ones() {
    let (_master, port, torque) = master(&[]);
    let servers = listed_servers(torque, 260, "FPS");
    let mut expected: Vec<SocketAddr> = servers
        .iter()
        .map(|s| s.socket.local_addr().unwrap())
        .collect();
    expected.sort();
    for flags in [0, 4] {
        let (mut got, rerequests) = client_list(torque, flags, "fps");
        got.sort();
        assert_eq!(got, expected, "flags {flags}");
        // 260 servers are two pages: the master sends one per request.
        assert!(
            rerequests >= 1,
            "flags {flags}: the second page was re-requested"
        );
    }
    // A game type nobody plays: one empty page.
    let (got, _) = client_list(torque, 0, "RTS");
    assert!(got.is_empty());
    // The native list shows them too, saying which protocol they speak.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let native = SocketAddr::from(([127, 0, 0, 1], port));
    let listed = runtime
        .block_on(switchboard_master::fetch_list(
            native,
            Default::default(),
            WAIT,
        ))
        .unwrap();
    assert_eq!(listed.len(), 260);
    assert!(listed
        .iter()
        .all(|l| l.info.tags.contains(&("protocol".into(), "torque".into()))));
}

#[test]
fn forged_torque_heartbeats_draw_a_bounded_number_of_info_requests() {
    let (_master, _, torque) = master(&[]);
    // The "victim": forged heartbeats name it by coming from its address.
    let victim = socket(Ipv4Addr::new(127, 0, 9, 9));
    for _ in 0..2000 {
        victim.send_to(&header(22, 0, 0, 1), torque).unwrap();
    }
    let mut requests = 0;
    let mut buf = [0u8; 64];
    while victim.recv_from(&mut buf).is_ok() {
        requests += 1;
    }
    // The burst (4), and at most a couple more for the time the flood took.
    assert!((1..=6).contains(&requests), "{requests} info requests");
}

#[test]
fn two_masters_on_one_redis_list_the_same_torque_servers() {
    let redis = switchboard_redis::testing::RedisProcess::start().unwrap();
    let url = redis.url();
    let (_a, _, torque_a) = master(&["--redis", &url]);
    let (_b, _, torque_b) = master(&["--redis", &url]);
    let _servers = listed_servers(torque_a, 3, "FPS");
    wait_until("master b lists them", WAIT, || {
        client_list(torque_b, 0, "any").0.len() == 3
    });
}
