//! What the processes of one kind (rooms servers, relays) share in Redis:
//! a signing key for the tickets they give each other, process numbers,
//! and each process's presence (address, load) with a TTL.
//!
//! Keys (`P` the prefix, `K` the kind: `rooms` or `relay`): `P:K:key` (the
//! key, hex; made by the first process, written again if missing at every
//! refresh, so a Redis that restarted empty gets it back),
//! `P:K:next_process` (a counter), `P:K:process:{n}` (hash `addr`,
//! `players`, TTL [`PRESENCE_TTL`]), `P:K:processes` (sorted set by
//! players).

use std::time::Duration;

use crate::store::{RedisStore, StoreError};

/// How long a process stays listed without a refresh.
pub const PRESENCE_TTL: Duration = Duration::from_secs(3);

/// How often a process refreshes its presence.
pub const REFRESH_EVERY: Duration = Duration::from_secs(1);

/// One kind of process in the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kind(pub(crate) &'static str);

impl Kind {
    pub(crate) fn key(self, store: &RedisStore, part: impl std::fmt::Display) -> String {
        store.key(format_args!("{}:{part}", self.0))
    }

    /// The service's key, made (32 random bytes) if no process made it yet.
    pub(crate) async fn make_signing_key(self, store: &RedisStore) -> Result<[u8; 32], StoreError> {
        let mut fresh = [0u8; 32];
        getrandom::fill(&mut fresh).expect("the OS random source failed");
        let key = self.key(store, "key");
        store
            .run(|mut c| async move {
                redis::cmd("SET")
                    .arg(&key)
                    .arg(to_hex(&fresh))
                    .arg("NX")
                    .query_async::<()>(&mut c)
                    .await
            })
            .await?;
        self.read_signing_key(store)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("the {} key vanished", self.0)))
    }

    /// The service's key, once a process made it.
    pub(crate) async fn read_signing_key(
        self,
        store: &RedisStore,
    ) -> Result<Option<[u8; 32]>, StoreError> {
        let key = self.key(store, "key");
        let hex: Option<String> = store
            .run(|mut c| async move { redis::cmd("GET").arg(&key).query_async(&mut c).await })
            .await?;
        match hex {
            None => Ok(None),
            Some(hex) => from_hex(&hex).map(Some).ok_or_else(|| {
                StoreError::Corrupt(format!("the {} key is not 32 hex bytes", self.0))
            }),
        }
    }

    /// A process number no other process of this kind has, below
    /// `2^bits`.
    pub(crate) async fn next_process(
        self,
        store: &RedisStore,
        bits: u32,
    ) -> Result<u32, StoreError> {
        let counter = self.key(store, "next_process");
        let process: u32 = store
            .run(|mut c| async move { redis::cmd("INCR").arg(&counter).query_async(&mut c).await })
            .await?;
        if u64::from(process) >= 1u64 << bits {
            return Err(StoreError::Corrupt(format!(
                "{} process number {process} is past the last one",
                self.0
            )));
        }
        Ok(process)
    }

    /// Queues the presence of `process` (reachable at `reach`, with
    /// `players`), and the service's key again if missing, on `pipe`.
    pub(crate) fn present(
        self,
        pipe: &mut redis::Pipeline,
        store: &RedisStore,
        process: u32,
        reach: &Reach,
        players: usize,
        signing_key: &str,
    ) {
        let ttl = PRESENCE_TTL.as_millis() as u64;
        pipe.cmd("SET")
            .arg(self.key(store, "key"))
            .arg(signing_key)
            .arg("NX")
            .ignore();
        let process_key = self.key(store, format_args!("process:{process}"));
        pipe.cmd("HSET")
            .arg(&process_key)
            .arg("addr")
            .arg(&reach.addr)
            .arg("players")
            .arg(players)
            .ignore();
        for (field, value) in [("ws", &reach.websocket), ("quic", &reach.quic)] {
            if let Some(value) = value {
                pipe.cmd("HSET")
                    .arg(&process_key)
                    .arg(field)
                    .arg(value)
                    .ignore();
            }
        }
        if let Some(offer) = &reach.webtransport {
            // Read at each refresh: the hashes change as the certificates
            // rotate (the next one's is given out a rotation ahead).
            let hashes: Vec<String> = offer.hashes().iter().map(|h| h.to_string()).collect();
            pipe.cmd("HSET")
                .arg(&process_key)
                .arg("wt")
                .arg(hashes.join(","))
                .ignore();
        }
        if let Some(fingerprint) = &reach.fingerprint {
            pipe.cmd("HSET")
                .arg(&process_key)
                .arg("tls")
                .arg(fingerprint.to_string())
                .ignore();
        }
        pipe.cmd("PEXPIRE").arg(&process_key).arg(ttl).ignore();
        pipe.cmd("ZADD")
            .arg(self.key(store, "processes"))
            .arg(players)
            .arg(process)
            .ignore();
    }

    /// Takes `process` out of the directory now (it stops).
    pub(crate) async fn withdraw(self, store: &RedisStore, process: u32) {
        let keys = (
            self.key(store, format_args!("process:{process}")),
            self.key(store, "processes"),
        );
        let _ = store
            .run(|mut c| async move {
                redis::pipe()
                    .cmd("DEL")
                    .arg(&keys.0)
                    .ignore()
                    .cmd("ZREM")
                    .arg(&keys.1)
                    .arg(process)
                    .ignore()
                    .query_async::<()>(&mut c)
                    .await
            })
            .await;
    }
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(hex: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if hex.len() != 64 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Where clients reach a process: its TCP address, and its WebSocket
/// listener's and QUIC port's if it has them (`host:port`, as clients dial
/// them); the fingerprint of the key it presents to other machines, if it
/// speaks TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reach {
    pub(crate) addr: String,
    pub(crate) websocket: Option<String>,
    pub(crate) quic: Option<String>,
    pub(crate) webtransport: Option<switchboard::socket::WebTransportOffer>,
    pub(crate) fingerprint: Option<switchboard::tls::Fingerprint>,
}

/// Tells a publisher where clients reach the process, once it listens:
/// nothing is published before.
#[derive(Debug)]
pub struct Serving(pub(crate) tokio::sync::oneshot::Sender<Reach>);

impl Serving {
    /// The process takes clients at `addr` (`host:port`, as clients dial
    /// it).
    pub fn at(self, addr: impl Into<String>) {
        self.at_pinned(addr, None);
    }

    /// The process takes clients at `addr`, in TLS with the key of
    /// `fingerprint` (`ManagerHandle::tls`'s): the matchmaker hands it out
    /// with each seat, for the client to pin the server by it.
    pub fn at_pinned(
        self,
        addr: impl Into<String>,
        fingerprint: Option<switchboard::tls::Fingerprint>,
    ) {
        let _ = self.0.send(Reach {
            addr: addr.into(),
            websocket: None,
            quic: None,
            webtransport: None,
            fingerprint,
        });
    }

    /// The process takes clients at `addr`, and WebSocket clients at
    /// `websocket` (`host:port`): a relay hands browsers over there.
    pub fn at_with_websocket(self, addr: impl Into<String>, websocket: impl Into<String>) {
        self.at_all(addr, Some(websocket.into()), None);
    }

    /// The process takes clients at `addr`, WebSocket clients at
    /// `websocket` and QUIC clients at `quic` (`host:port`, UDP) where it
    /// has them: a relay hands each player over on the transport it uses.
    pub fn at_all(self, addr: impl Into<String>, websocket: Option<String>, quic: Option<String>) {
        self.at_all_with_webtransport(addr, websocket, quic, None);
    }

    /// As [`at_all`](Self::at_all), and browsers reach the process over
    /// WebTransport on its QUIC port, trusting the certificates of
    /// `webtransport` (`RunningRelay::webtransport`): a relay hands a
    /// browser on WebTransport over to another one's WebTransport, with the
    /// hashes published at each refresh, so always current.
    pub fn at_all_with_webtransport(
        self,
        addr: impl Into<String>,
        websocket: Option<String>,
        quic: Option<String>,
        webtransport: Option<switchboard::socket::WebTransportOffer>,
    ) {
        let _ = self.0.send(Reach {
            addr: addr.into(),
            websocket,
            quic,
            webtransport,
            fingerprint: None,
        });
    }
}

/// Logs a publisher's failures once per outage, and the recovery with the
/// count of what failed in between (`switchboard::session::Outage`).
pub(crate) struct Outage(switchboard::session::Outage);

impl Outage {
    /// A publisher named `what` in the log ("rooms", "relay presence").
    pub(crate) fn new(what: &'static str) -> Self {
        Self(switchboard::session::Outage::new(what))
    }

    pub(crate) fn record(&mut self, result: Result<(), StoreError>) {
        match result {
            Ok(()) => {
                self.0.succeeded();
            }
            Err(err) => {
                self.0
                    .failed(&format_args!("{err}; not published, games go on, retrying"));
            }
        }
    }
}
