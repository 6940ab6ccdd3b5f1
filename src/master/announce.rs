//! The game server's side: heartbeats to its masters from its own game port,
//! and answers to info queries and pings on that port.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;

use super::protocol::{self, Datagram, ServerInfo, MAX_DATAGRAM};
use crate::session::{KeyedLimiter, RateLimit};

/// What a game server announces, and to which masters.
#[derive(Debug, Clone, PartialEq)]
pub struct Announce {
    /// The masters to register with.
    pub masters: Vec<SocketAddr>,
    /// What to say about this server (the player count is kept current by
    /// the server manager).
    pub info: ServerInfo,
    /// Time between heartbeats (default 60 s; a master drops a server silent
    /// for its expiry, 180 s by default).
    pub heartbeat_interval: Duration,
    /// Info queries and pings answered per minute per source IP that is not
    /// a master (default 120). Past it they are dropped.
    pub answers_per_minute: f64,
}

impl Announce {
    /// Announces `info` to `masters` with the default timers.
    pub fn new(masters: Vec<SocketAddr>, info: ServerInfo) -> Self {
        Self {
            masters,
            info,
            heartbeat_interval: Duration::from_secs(60),
            answers_per_minute: 120.0,
        }
    }
}

/// A running announcer. Dropping it stops the heartbeats.
#[derive(Debug)]
pub struct Announcer {
    info: Arc<Mutex<ServerInfo>>,
    stop: CancellationToken,
    local_addr: SocketAddr,
}

impl Announcer {
    /// Binds UDP on `addr` (the game server's address and port) and starts
    /// heartbeats and answers on the current tokio runtime.
    pub async fn start(addr: SocketAddr, announce: Announce) -> std::io::Result<Announcer> {
        let udp = UdpSocket::bind(addr).await?;
        let local_addr = udp.local_addr()?;
        let info = Arc::new(Mutex::new(announce.info.clone()));
        let stop = CancellationToken::new();
        tokio::spawn(serve(udp, announce, info.clone(), stop.clone()));
        Ok(Announcer {
            info,
            stop,
            local_addr,
        })
    }

    /// Changes what is announced.
    pub fn update(&self, change: impl FnOnce(&mut ServerInfo)) {
        change(&mut self.info.lock().expect("info lock"));
    }

    /// The UDP address it answers on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Drop for Announcer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn serve(
    udp: UdpSocket,
    announce: Announce,
    info: Arc<Mutex<ServerInfo>>,
    stop: CancellationToken,
) {
    let mut heartbeat = tokio::time::interval(announce.heartbeat_interval);
    let beat = protocol::encode(&Datagram::Heartbeat);
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    let per_minute = announce.answers_per_minute;
    let mut budgets = KeyedLimiter::new(RateLimit {
        per_second: per_minute / 60.0,
        burst: (per_minute / 6.0).max(1.0),
    });
    loop {
        tokio::select! {
            _ = heartbeat.tick() => {
                for master in &announce.masters {
                    if let Err(err) = udp.send_to(&beat, master).await {
                        tracing::debug!(%master, %err, "heartbeat not sent");
                    }
                }
                budgets.forget_idle(Instant::now(), Duration::from_secs(600));
            }
            received = udp.recv_from(&mut buf) => {
                let Ok((len, from)) = received else { continue };
                if len > MAX_DATAGRAM {
                    continue;
                }
                let from_master = announce.masters.contains(&from);
                if !from_master && !budgets.allow(from.ip(), Instant::now()) {
                    continue;
                }
                let reply = match protocol::decode(&buf[..len]) {
                    Ok(Datagram::InfoQuery { challenge, .. }) => {
                        let info = info.lock().expect("info lock").clone();
                        let reply = protocol::encode(&Datagram::InfoReply { challenge, info });
                        // Never answer a stranger with more than it sent.
                        (from_master || reply.len() <= len).then_some(reply)
                    }
                    Ok(Datagram::Ping { nonce }) => Some(protocol::encode(&Datagram::Pong { nonce })),
                    _ => None,
                };
                if let Some(reply) = reply {
                    let _ = udp.send_to(&reply, from).await;
                }
            }
            _ = stop.cancelled() => break,
        }
    }
}
