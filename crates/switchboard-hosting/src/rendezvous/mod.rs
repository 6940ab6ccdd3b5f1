//! A relay by join code, for a host whose router forwards nothing (or who
//! would rather not show its address).
//!
//! ```text
//!  host ──control (SWHO)──> relay          relay ──SWCD code──> host
//!  player ──SWJN code──> relay ──SWIN ticket──> host
//!  host ──new connection, SWDA secret ticket──> relay
//!  player <══ frames, unchanged ══> relay <══ frames, unchanged ══> host's server
//! ```
//!
//! The relay reads each frame's length (to bound it and to pace the code's
//! bytes), never its content: sessions, reconnects with the same id,
//! WebSocket players (a message per frame, `ws://relay:port/CODE`) and the
//! host's own validation work as over a direct connection. The host side
//! is [`HostLink`]; a player's client dials `CODE@relay:port` through
//! [`JoinCodes`]; the frames are [`frames`]
//! (`docs/PROTOCOL.md` section 12); the limits are [`RendezvousConfig`]
//! (`docs/SECURITY.md`).

pub mod frames;
mod games;
mod host;
mod join;
mod pipe;
mod serve;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use switchboard::lifecycle::{ListenOptions, Running, StopHandle};
use switchboard::tls::TlsSettings;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use host::{HostConfig, HostLink, HostStatus, HostTarget};
pub use join::JoinCodes;

/// The relay's limits. Every one is a guard against a peer that costs the
/// relay more than it pays, or keeps others out.
#[derive(Debug, Clone)]
pub struct RendezvousConfig {
    /// Codes held at once, by every host together (default 10,000). Past
    /// it a host is refused with the reason.
    pub max_codes: usize,
    /// Codes one address holds at once (default 4; an IPv6 address counts
    /// per /64): a host cannot hoard codes. Past it its registration is
    /// refused with the reason.
    pub max_codes_per_address: usize,
    /// Codes one network holds at once, an IPv4 /24 or an IPv6 /48
    /// (default 16). Past it likewise.
    pub max_codes_per_prefix: usize,
    /// How long a code must have gone unused (no player, its host neither
    /// coming nor going) before a new host may take its place when the
    /// relay holds `max_codes` (default 60 s). Codes registered and never
    /// used cannot keep new hosts out for longer.
    pub min_idle_to_evict: Duration,
    /// Players one code pipes at once (default 64). Past it a player is
    /// told the game is full at the relay.
    pub max_players_per_code: usize,
    /// Bytes a second one code's players and host send through the relay,
    /// both ways together (default 4 MiB). Past it the relay reads more
    /// slowly (TCP pushes back on the senders): nothing is dropped.
    pub bytes_per_second_per_code: u64,
    /// The largest frame piped, its length field (default 1 MiB, the
    /// framework's own `max_frame_len`). A peer that sends a longer one is
    /// disconnected, and so is the other side of its pipe.
    pub max_frame_len: usize,
    /// Connections from one address that have not yet said what they are
    /// (default 16). Further ones are closed at once.
    pub max_pending_per_address: usize,
    /// Bytes of a WebSocket player's HTTP request head (default 8 KiB); a
    /// longer one is answered 431.
    pub max_request_head: usize,
    /// Players piped from one address at once (default 32).
    pub max_players_per_address: usize,
    /// How long a new connection has to send its first frame (default 5 s).
    pub first_frame_timeout: Duration,
    /// How long the host has to open a player's data connection (default
    /// 5 s); past it the player is told the host did not answer.
    pub host_answer_timeout: Duration,
    /// Wrong join codes one address may try in a minute (default 20, at
    /// once or spread out); past it, its joins are refused (the code not
    /// looked up) until its budget refills.
    pub wrong_codes_per_minute: u32,
    /// Wrong join codes every address together may try in a second
    /// (default 50): many addresses cannot guess faster than this. A code
    /// is one of 32^8 (about 1.1 × 10^12): with 10,000 codes held, finding
    /// any one at this rate takes about 25 days on average.
    pub wrong_codes_per_second: u32,
    /// Addresses whose wrong codes are remembered at most (default
    /// 65,536); past it those whose budget refilled are forgotten first.
    pub max_guessing_addresses: usize,
    /// Connections open at once, of every kind (default 16,384; the relay
    /// raises its open-file limit at start, and the command line cuts this
    /// to fit it). Past it a new connection is closed at once.
    pub max_connections: usize,
    /// How long a pipe may go without a byte in one direction (default
    /// 60 s; Switchboard peers ping each other every few seconds). Past it
    /// both sides are closed.
    pub pipe_idle_timeout: Duration,
    /// How long one frame may take to arrive whole once begun (default
    /// 30 s). Past it both sides are closed. The relay holds no more than
    /// 16 KiB of a TCP frame at a time, whatever its length.
    pub frame_stall_timeout: Duration,
    /// How long a code outlives its host's control connection (default
    /// 30 s): a host that reconnects in time keeps its code.
    pub host_grace: Duration,
    /// How long a code lives with no player joining or piped (default 1 h).
    pub idle_expiry: Duration,
    /// How often the relay and a host ping each other on the control
    /// connection (default 10 s); a control connection silent for three
    /// times this is closed.
    pub keepalive: Duration,
    /// How the relay's ports speak to other machines (default: TLS 1.3
    /// with the relay's own identity, made in the default data directory;
    /// nothing on loopback). A host's control connection from another
    /// machine must be in TLS (its code's secret travels on it), and so
    /// must a browser's WebSocket (`wss://`: its frames are plain inside);
    /// a native player's join may come plain, its code then its own TLS
    /// with the host, which the relay only pipes.
    pub tls: TlsSettings,
}

impl Default for RendezvousConfig {
    fn default() -> Self {
        Self {
            max_codes: 10_000,
            max_codes_per_address: 4,
            max_codes_per_prefix: 16,
            min_idle_to_evict: Duration::from_secs(60),
            max_players_per_code: 64,
            bytes_per_second_per_code: 4 * 1024 * 1024,
            max_frame_len: 1024 * 1024,
            max_pending_per_address: 16,
            max_request_head: 8 * 1024,
            max_players_per_address: 32,
            first_frame_timeout: Duration::from_secs(5),
            host_answer_timeout: Duration::from_secs(5),
            wrong_codes_per_minute: 20,
            wrong_codes_per_second: 50,
            max_guessing_addresses: 65_536,
            max_connections: 16_384,
            pipe_idle_timeout: Duration::from_secs(60),
            frame_stall_timeout: Duration::from_secs(30),
            host_grace: Duration::from_secs(30),
            idle_expiry: Duration::from_secs(3600),
            keepalive: Duration::from_secs(10),
            tls: TlsSettings::default(),
        }
    }
}

/// What the relay has done, for an operator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RendezvousStats {
    /// Codes held now.
    pub codes: usize,
    /// Players piped now.
    pub players: usize,
    /// Players piped since the start.
    pub joined: u64,
    /// Connections turned away (limits, wrong codes, bad frames).
    pub refused: u64,
    /// Bytes piped, both ways, since the start.
    pub bytes: u64,
    /// Connections open now, of every kind.
    pub connections: usize,
    /// Of those, connections that have not yet said what they are (a
    /// join, a host, a data connection): at most
    /// [`RendezvousConfig::max_pending_per_address`] from one address.
    pub unclassified: usize,
}

/// A join-code relay bound and ready to [`run`](Self::run): a TCP port for
/// hosts and players, and a WebSocket port for players in browsers. Made
/// by [`RendezvousBuilder::build`]; [`RendezvousServer::builder`] starts
/// describing one.
#[derive(Debug)]
pub struct RendezvousServer {
    tcp: TcpListener,
    tls: Option<switchboard::tls::TlsServer>,
    websocket: Option<(TcpListener, Option<switchboard::tls::TlsServer>)>,
    handle: RendezvousHandle,
}

/// A handle to a join-code relay: its addresses, counters, and the way to
/// stop it.
#[derive(Debug, Clone)]
pub struct RendezvousHandle {
    shared: Arc<serve::RendezvousState>,
    /// The listeners' caps: their counts are the open connections.
    caps: switchboard::socket::ListenerCaps,
    addr: SocketAddr,
    websocket: Option<SocketAddr>,
    fingerprint: Option<switchboard::tls::Fingerprint>,
    stop: CancellationToken,
}

/// A join-code relay running in this process: reads like its
/// [`RendezvousHandle`]; dropping it (or `shutdown().await`) stops it.
pub type RunningRendezvous = Running<RendezvousHandle, ()>;

/// A join-code relay about to start, made by [`RendezvousServer::builder`]:
/// the same shape as every server's builder.
#[derive(Debug, Default)]
pub struct RendezvousBuilder {
    config: RendezvousConfig,
    listen: ListenOptions,
    websocket_port: Option<u16>,
}

impl RendezvousServer {
    /// Starts describing a join-code relay: loopback, a free port, no
    /// WebSocket port, default limits, until told otherwise.
    pub fn builder() -> RendezvousBuilder {
        RendezvousBuilder::default()
    }

    /// Serves until `shutdown` completes or its handle stops it; every
    /// connection is closed then.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let RendezvousServer {
            tcp,
            tls,
            websocket,
            handle,
        } = self;
        let (shared, caps, stop) = (handle.shared, handle.caps, handle.stop);
        let websocket = async {
            if let Some((ws, ws_tls)) = websocket {
                serve::accept(ws, shared.clone(), true, caps.clone(), ws_tls).await;
            }
        };
        let stopped = async {
            tokio::select! {
                () = shutdown => stop.cancel(),
                () = stop.cancelled() => {}
            }
        };
        tokio::join!(
            serve::accept(tcp, shared.clone(), false, caps.clone(), tls),
            websocket,
            games::reap(shared.clone()),
            stopped,
        );
    }
}

impl RendezvousBuilder {
    /// Its limits, and how it speaks to other machines.
    pub fn config(mut self, config: RendezvousConfig) -> Self {
        self.config = config;
        self
    }

    switchboard::listen_setters!(
        "The port for hosts and TCP players (default 0: a free one, read with `local_addr`)."
    );

    /// Also a port for WebSocket players (`ws://ADDR/CODE`; 0: a free one,
    /// read with `websocket_addr`).
    pub fn websocket_port(mut self, port: u16) -> Self {
        self.websocket_port = Some(port);
        self
    }

    /// Binds, and returns the relay and its handle, for tokio code that runs
    /// it itself (`server.run(stop).await`).
    pub fn build(self) -> std::io::Result<(RendezvousServer, RendezvousHandle)> {
        let RendezvousBuilder {
            config,
            listen,
            websocket_port,
        } = self;
        let tcp = switchboard::lifecycle::tcp_listener(listen.addr())?;
        let addr = tcp.local_addr()?;
        let tls = config.tls.for_address(addr)?;
        let websocket = match websocket_port {
            Some(port) => {
                let ws = switchboard::lifecycle::tcp_listener(SocketAddr::new(addr.ip(), port))?;
                let ws_tls = config.tls.for_address(ws.local_addr()?)?;
                Some((ws, ws_tls))
            }
            None => None,
        };
        let websocket_addr = websocket
            .as_ref()
            .map(|(ws, _)| ws.local_addr())
            .transpose()?;
        let fingerprint = tls.as_ref().map(switchboard::tls::TlsServer::fingerprint);
        let stop = CancellationToken::new();
        let shared = Arc::new(serve::RendezvousState::new(config, stop.clone()));
        let handle = RendezvousHandle {
            caps: shared.caps(),
            shared,
            addr,
            websocket: websocket_addr,
            fingerprint,
            stop,
        };
        let server = RendezvousServer {
            tcp,
            tls,
            websocket,
            handle: handle.clone(),
        };
        Ok((server, handle))
    }

    /// Binds and runs the relay on the background runtime (or the current
    /// one).
    pub fn spawn(self) -> std::io::Result<RunningRendezvous> {
        let (server, handle) = self.build()?;
        Ok(Running::spawn(handle, server.run(std::future::pending())))
    }
}

impl RendezvousHandle {
    /// The fingerprint of the certificate the relay presents to other
    /// machines (`None`: plain, on loopback or by the operator's choice):
    /// hosts pin it.
    pub fn tls_fingerprint(&self) -> Option<switchboard::tls::Fingerprint> {
        self.fingerprint
    }

    /// Where hosts and TCP players connect.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where WebSocket players connect (`ws://ADDR/CODE`), if it listens.
    pub fn websocket_addr(&self) -> Option<SocketAddr> {
        self.websocket
    }

    /// The counters now.
    pub fn stats(&self) -> RendezvousStats {
        RendezvousStats {
            connections: self.caps.open(),
            unclassified: self.caps.pending(),
            ..self.shared.stats()
        }
    }

    /// Stops accepting and closes every connection.
    pub fn shutdown(&self) {
        self.stop.cancel();
    }
}

impl StopHandle for RendezvousHandle {
    fn stop(&self) {
        self.shutdown();
    }
}
