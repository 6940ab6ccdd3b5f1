//! The game server's side: heartbeats to its masters from its own game port,
//! and answers to info queries and pings on that port.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;

use crate::protocol::{self, Datagram, ServerInfo, MAX_DATAGRAM};
use switchboard::manager::{Listing, ListingHook, ListingStatus, ListingUpdates};
use switchboard::session::{KeyedLimiter, RateLimit};

/// The environment variable that carries an [`Announce`] to a hosted game's
/// child server (`LocalServerOptions::env`): hex of the bincode of
/// `(masters, info, heartbeat seconds)`.
pub const ENV_ANNOUNCE: &str = "SWITCHBOARD_ANNOUNCE";

/// What a game server announces, and to which masters.
#[derive(Debug, Clone, PartialEq)]
pub struct Announce {
    /// The masters to register with.
    pub masters: Vec<SocketAddr>,
    /// What to say about this server (the player count is kept current by
    /// the server manager).
    pub info: ServerInfo,
    /// Time between heartbeats (default 5 s; a master drops a server silent
    /// for its expiry, 20 s by default, and one that says goodbye at once).
    pub heartbeat_interval: Duration,
    /// Info queries and pings answered per minute per source IP (default
    /// 120), but for the one query each master sends after a heartbeat.
    /// Past it they are dropped.
    pub answers_per_minute: f64,
}

impl Announce {
    /// Announces `info` to `masters` with the default timers.
    pub fn new(masters: Vec<SocketAddr>, info: ServerInfo) -> Self {
        Self {
            masters,
            info,
            heartbeat_interval: Duration::from_secs(5),
            answers_per_minute: 120.0,
        }
    }
}

impl Announce {
    /// The hook a `ManagerConfig::listing` takes: once the server listens,
    /// heartbeats go out from its game port, and the player count is kept
    /// current.
    pub fn hook(self) -> ListingHook {
        ListingHook::new(self)
    }

    /// This announce as an environment variable for a child server
    /// (`LocalServerOptions::env`); [`from_env`](Self::from_env) reads it.
    pub fn to_env(&self) -> (String, String) {
        let value = (
            &self.masters,
            &self.info,
            self.heartbeat_interval.as_secs_f64(),
        );
        let bytes =
            switchboard::codec::encode_value(&value).expect("announce settings always encode");
        let hex = bytes.iter().map(|b| format!("{b:02x}")).collect();
        (ENV_ANNOUNCE.to_string(), hex)
    }

    /// The announce a parent passed in [`ENV_ANNOUNCE`], if any.
    pub fn from_env() -> Option<Self> {
        Self::decode_hex(&std::env::var(ENV_ANNOUNCE).ok()?)
    }

    fn decode_hex(hex: &str) -> Option<Self> {
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|i| {
                hex.get(i..i + 2)
                    .and_then(|pair| u8::from_str_radix(pair, 16).ok())
            })
            .collect();
        let (masters, info, secs): (Vec<SocketAddr>, ServerInfo, f64) =
            switchboard::codec::decode_value(&bytes?).ok()?;
        let mut announce = Announce::new(masters, info);
        announce.heartbeat_interval = Duration::from_secs_f64(secs.clamp(0.05, 86_400.0));
        Some(announce)
    }
}

impl Listing for Announce {
    /// The status and tags are in the info before the first heartbeat.
    fn start(
        &self,
        addr: SocketAddr,
        status: ListingStatus,
        tags: &[(String, String)],
    ) -> std::io::Result<Box<dyn ListingUpdates>> {
        let mut announce = self.clone();
        show_status(&mut announce.info, status);
        for (key, value) in tags {
            show_tag(&mut announce.info, key, value);
        }
        let announcer = Announcer::serve(std::net::UdpSocket::bind(addr)?, announce)?;
        Ok(Box::new(announcer))
    }
}

/// Shows `status` in `info`: its player count, and its capacity when the
/// game did not set one.
fn show_status(info: &mut ServerInfo, status: ListingStatus) {
    info.players = status.players.min(u16::MAX as usize) as u16;
    if info.max_players == 0 {
        info.max_players = status.capacity.min(u16::MAX as usize) as u16;
    }
    info.max_players = info.max_players.max(info.players);
    info.bots = info.bots.min(info.players);
}

/// Sets a tag of `info`: the key's value replaced, or the tag added while
/// the info keeps within its limits (16 tags, 64 bytes each; past them the
/// tag is not shown, and the log says so).
fn show_tag(info: &mut ServerInfo, key: &str, value: &str) {
    let mut changed = info.clone();
    match changed.tags.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value.to_string(),
        None => changed.tags.push((key.to_string(), value.to_string())),
    }
    match changed.check() {
        Ok(()) => *info = changed,
        Err(err) => tracing::warn!(key, %err, "listing tag not shown"),
    }
}

impl ListingUpdates for Announcer {
    /// Keeps what the server announces current: its player count, and its
    /// capacity when the game did not set one.
    fn update(&mut self, status: ListingStatus) {
        self.change(|info| show_status(info, status));
    }

    /// Sets a tag of what is announced (within the info's limits).
    fn set_tag(&mut self, key: &str, value: &str) {
        self.change(|info| show_tag(info, key, value));
    }
}

/// A running announcer. Dropping it stops the heartbeats and says goodbye
/// to each master that listed the server: it is off their lists at once.
#[derive(Debug)]
pub struct Announcer {
    info: Arc<Mutex<ServerInfo>>,
    stop: CancellationToken,
    local_addr: SocketAddr,
    /// Each master's last challenge we answered: what a goodbye carries.
    answered: Answered,
    /// The socket the goodbyes leave from, when dropped.
    farewell: std::net::UdpSocket,
}

/// Each master's last challenge, shared by the announcer's task and its
/// handle.
type Answered = Arc<Mutex<HashMap<SocketAddr, u64>>>;

impl Announcer {
    /// Binds UDP on `addr` (the game server's address and port) and starts
    /// heartbeats and answers on the current tokio runtime.
    pub async fn start(addr: SocketAddr, announce: Announce) -> std::io::Result<Announcer> {
        Self::serve(std::net::UdpSocket::bind(addr)?, announce)
    }

    fn serve(udp: std::net::UdpSocket, announce: Announce) -> std::io::Result<Announcer> {
        udp.set_nonblocking(true)?;
        let farewell = udp.try_clone()?;
        let udp = UdpSocket::from_std(udp)?;
        let local_addr = udp.local_addr()?;
        let info = Arc::new(Mutex::new(announce.info.clone()));
        let stop = CancellationToken::new();
        let answered = Answered::default();
        tokio::spawn(serve(
            udp,
            announce,
            info.clone(),
            answered.clone(),
            stop.clone(),
        ));
        Ok(Announcer {
            info,
            stop,
            local_addr,
            answered,
            farewell,
        })
    }

    /// Changes what is announced.
    pub fn change(&self, change: impl FnOnce(&mut ServerInfo)) {
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
        // Sent here, not by the task: a process that is exiting may never
        // run the task again.
        let answered = std::mem::take(&mut *self.answered.lock().expect("answered lock"));
        for (master, challenge) in answered {
            let goodbye = protocol::encode(&Datagram::Goodbye { challenge });
            if let Err(err) = self.farewell.send_to(&goodbye, master) {
                tracing::debug!(%master, %err, "goodbye not sent");
            }
        }
    }
}

/// How long after a heartbeat its master's query is answered in full (the
/// master keeps a challenge 10 s).
const QUERY_WINDOW: Duration = Duration::from_secs(10);

async fn serve(
    udp: UdpSocket,
    announce: Announce,
    info: Arc<Mutex<ServerInfo>>,
    answered: Answered,
    stop: CancellationToken,
) {
    let mut heartbeat = tokio::time::interval(announce.heartbeat_interval);
    let beat = protocol::heartbeat();
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    let per_minute = announce.answers_per_minute;
    let mut budgets = KeyedLimiter::new(RateLimit {
        per_second: per_minute / 60.0,
        burst: (per_minute / 6.0).max(1.0),
    });
    // The masters that may query us now: one query each per heartbeat, for
    // as long as the master keeps its challenge. Any other packet that
    // claims a master's address is treated as a stranger's (rate-limited,
    // never answered with more than it sent), so a forged source cannot
    // turn us on a master.
    let mut expected: HashMap<SocketAddr, Instant> = HashMap::new();
    loop {
        tokio::select! {
            _ = heartbeat.tick() => {
                let now = Instant::now();
                for master in &announce.masters {
                    if let Err(err) = udp.send_to(&beat, master).await {
                        tracing::debug!(%master, %err, "heartbeat not sent");
                    }
                    expected.insert(*master, now);
                }
                budgets.forget_idle(now, Duration::from_secs(600));
            }
            received = udp.recv_from(&mut buf) => {
                let Ok((len, from)) = received else { continue };
                if len > MAX_DATAGRAM {
                    continue;
                }
                let now = Instant::now();
                let datagram = protocol::decode(&buf[..len]);
                let awaited = matches!(datagram, Ok(Datagram::InfoQuery { .. }))
                    && expected
                        .remove(&from)
                        .is_some_and(|at| now.saturating_duration_since(at) < QUERY_WINDOW);
                if !awaited && !budgets.allow(switchboard::socket::address_key(from.ip()), now) {
                    continue;
                }
                if let (true, Ok(Datagram::InfoQuery { challenge, .. })) = (awaited, &datagram) {
                    // What our goodbye to this master must carry.
                    answered.lock().expect("answered lock").insert(from, *challenge);
                }
                let reply = match datagram {
                    Ok(Datagram::InfoQuery { challenge, .. }) => {
                        let info = info.lock().expect("info lock").clone();
                        let reply = protocol::encode(&Datagram::InfoReply { challenge, info });
                        // Never answer a stranger with more than it sent.
                        (awaited || reply.len() <= len).then_some(reply)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announce_settings_cross_the_environment() {
        let mut announce = Announce::new(
            vec!["127.0.0.1:27900".parse().unwrap()],
            ServerInfo {
                name: "hosted".into(),
                region: "eu".into(),
                ..Default::default()
            },
        );
        announce.heartbeat_interval = Duration::from_millis(500);
        let (name, hex) = announce.to_env();
        assert_eq!(name, ENV_ANNOUNCE);
        assert_eq!(Announce::decode_hex(&hex), Some(announce));
        assert_eq!(Announce::decode_hex("zz"), None);
    }

    #[tokio::test]
    async fn the_first_info_a_master_gets_carries_the_tags_and_status_given_at_start() {
        // The fingerprint was set a tick after the listing started: a
        // master that asked at once listed the server without it.
        let master = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let announce = Announce::new(vec![master.local_addr().unwrap()], ServerInfo::default());
        let status = ListingStatus {
            players: 3,
            capacity: 8,
        };
        let tags = [("tls".to_string(), "sha256-of-its-key".to_string())];
        let _announcer = announce
            .start("127.0.0.1:0".parse().unwrap(), status, &tags)
            .unwrap();
        let mut buf = vec![0u8; MAX_DATAGRAM + 1];
        let within = Duration::from_secs(10);
        let (_, game) = tokio::time::timeout(within, master.recv_from(&mut buf))
            .await
            .unwrap()
            .unwrap();
        let query = protocol::encode(&Datagram::InfoQuery {
            challenge: 9,
            padding: Vec::new(),
        });
        master.send_to(&query, game).await.unwrap();
        let info = loop {
            let (len, _) = tokio::time::timeout(within, master.recv_from(&mut buf))
                .await
                .unwrap()
                .unwrap();
            if let Ok(Datagram::InfoReply { challenge: 9, info }) = protocol::decode(&buf[..len]) {
                break info;
            }
        };
        assert_eq!(info.tags, tags.to_vec());
        assert_eq!((info.players, info.max_players), (3, 8));
    }
}
