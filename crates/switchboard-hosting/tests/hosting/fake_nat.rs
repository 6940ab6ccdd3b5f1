//! A fake PCP / NAT-PMP gateway on a loopback address, port 5351: it
//! answers as RFC 6887 and RFC 6886 say (or refuses, or stays silent) and
//! records every request it is sent.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::UdpSocket;

/// What the gateway speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaks {
    /// PCP (and NAT-PMP too, as RFC 6887 lets a server).
    Pcp,
    /// NAT-PMP only: a PCP request gets "unsupported version".
    NatPmp,
    /// Reads every request and answers none.
    Nothing,
}

/// How the fake gateway behaves.
#[derive(Debug, Clone)]
pub struct Behaviour {
    pub speaks: Speaks,
    /// The longest lease it grants, in seconds.
    pub max_lifetime: u32,
    /// A result code for every mapping request (PCP 2 / NAT-PMP 2: not
    /// authorized), or 0 to grant.
    pub refuse: u8,
    /// Added to the asked port (a gateway whose port was taken).
    pub port_offset: u16,
    pub external_ip: Ipv4Addr,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            speaks: Speaks::Pcp,
            max_lifetime: 3600,
            refuse: 0,
            port_offset: 0,
            external_ip: Ipv4Addr::new(203, 0, 113, 7),
        }
    }
}

/// A request the gateway was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A PCP MAP: lifetime 0 is a deletion.
    PcpMap { internal_port: u16, lifetime: u32 },
    /// A NAT-PMP mapping: lifetime 0 is a deletion.
    NatPmpMap { internal_port: u16, lifetime: u32 },
    /// NAT-PMP's external address request.
    NatPmpAddress,
    /// A PCP request a NAT-PMP gateway turned away.
    PcpRefusedVersion,
    /// A request the silent gateway ignored.
    Ignored,
}

pub struct FakeNatGateway {
    pub ip: IpAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    protocols: Arc<Mutex<Vec<&'static str>>>,
    task: tokio::task::JoinHandle<()>,
}

/// Each gateway on an address of its own (127.0.53.N), as the port is
/// fixed; also an address where no gateway listens.
pub fn fresh_ip() -> Ipv4Addr {
    static NEXT: AtomicU8 = AtomicU8::new(1);
    Ipv4Addr::new(127, 0, 53, NEXT.fetch_add(1, Ordering::Relaxed))
}

impl FakeNatGateway {
    pub async fn start(behaviour: Behaviour) -> Self {
        Self::start_at(fresh_ip(), behaviour).await
    }

    pub async fn start_at(ip: Ipv4Addr, behaviour: Behaviour) -> Self {
        let socket = UdpSocket::bind((ip, 5351)).await.expect("bind 5351");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let protocols = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let asked_for = protocols.clone();
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 1100];
            loop {
                let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                    return;
                };
                let (event, answer) = answer(&behaviour, &buf[..n]);
                log.lock().unwrap().push(event);
                asked_for.lock().unwrap().extend(protocol_of(&buf[..n]));
                if let Some(answer) = answer {
                    let _ = socket.send_to(&answer, from).await;
                }
            }
        });
        Self {
            ip: ip.into(),
            seen,
            protocols,
            task,
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The protocol of each mapping asked for (and deleted), in order.
    pub fn protocols(&self) -> Vec<&'static str> {
        self.protocols.lock().unwrap().clone()
    }
}

/// The protocol a mapping request names: PCP's protocol byte (RFC 6887
/// section 11.1: 6 TCP, 17 UDP), NAT-PMP's opcode (RFC 6886 section 3.3:
/// 1 UDP, 2 TCP).
fn protocol_of(request: &[u8]) -> Option<&'static str> {
    let name = |tcp: bool| if tcp { "TCP" } else { "UDP" };
    match request.first() {
        Some(2) if request.len() >= 60 && request[1] == 1 => Some(name(request[36] == 6)),
        Some(0) if request.len() == 12 => Some(name(request[1] == 2)),
        _ => None,
    }
}

impl Drop for FakeNatGateway {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const EPOCH: u32 = 1000;

fn answer(b: &Behaviour, request: &[u8]) -> (Seen, Option<Vec<u8>>) {
    if b.speaks == Speaks::Nothing {
        return (Seen::Ignored, None);
    }
    match (request.first(), b.speaks) {
        (Some(2), Speaks::NatPmp) => {
            // RFC 6887 section 9: a NAT-PMP server answers with its version
            // and result 1, unsupported version.
            let mut out = vec![0, 0x80, 0, 1];
            out.extend(EPOCH.to_be_bytes());
            (Seen::PcpRefusedVersion, Some(out))
        }
        (Some(2), _) if request.len() >= 60 => pcp_map(b, request),
        (Some(0), _) if request.len() == 2 && request[1] == 0 => {
            let mut out = vec![0, 128, 0, 0];
            out.extend(EPOCH.to_be_bytes());
            out.extend(b.external_ip.octets());
            (Seen::NatPmpAddress, Some(out))
        }
        (Some(0), _) if request.len() == 12 => nat_pmp_map(b, request),
        _ => (Seen::Ignored, None),
    }
}

fn pcp_map(b: &Behaviour, request: &[u8]) -> (Seen, Option<Vec<u8>>) {
    let asked = u32::from_be_bytes(request[4..8].try_into().unwrap());
    let internal_port = u16::from_be_bytes([request[40], request[41]]);
    let suggested = u16::from_be_bytes([request[42], request[43]]);
    let lifetime = asked.min(b.max_lifetime);
    let mut out = vec![2, 0x81, 0, b.refuse];
    out.extend(lifetime.to_be_bytes());
    out.extend(EPOCH.to_be_bytes());
    out.extend([0u8; 12]);
    out.extend(&request[24..36]); // nonce
    out.push(request[36]); // protocol
    out.extend([0u8; 3]);
    out.extend(internal_port.to_be_bytes());
    let external = if asked == 0 {
        0
    } else {
        suggested.max(internal_port) + b.port_offset
    };
    out.extend(external.to_be_bytes());
    out.extend(b.external_ip.to_ipv6_mapped().octets());
    let seen = Seen::PcpMap {
        internal_port,
        lifetime: asked,
    };
    (seen, Some(out))
}

fn nat_pmp_map(b: &Behaviour, request: &[u8]) -> (Seen, Option<Vec<u8>>) {
    let op = request[1];
    let internal_port = u16::from_be_bytes([request[4], request[5]]);
    let suggested = u16::from_be_bytes([request[6], request[7]]);
    let asked = u32::from_be_bytes(request[8..12].try_into().unwrap());
    let lifetime = asked.min(b.max_lifetime);
    let external = if asked == 0 {
        0
    } else {
        suggested.max(internal_port) + b.port_offset
    };
    let mut out = vec![0, 128 + op, 0, b.refuse];
    out.extend(EPOCH.to_be_bytes());
    out.extend(internal_port.to_be_bytes());
    out.extend(external.to_be_bytes());
    out.extend(lifetime.to_be_bytes());
    let seen = Seen::NatPmpMap {
        internal_port,
        lifetime: asked,
    };
    (seen, Some(out))
}
