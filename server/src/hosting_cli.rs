//! Hosting from home: `--map-port` asks the router to forward the server's
//! ports, says where players on the internet connect, and removes the
//! mapping when it stops (Ctrl-C and SIGTERM included); `--rendezvous`
//! takes players through a join-code relay.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Args;
use std::sync::Arc;
use switchboard::socket::{BindScope, Dialer};
use switchboard::tls::ServerTrust;

use switchboard_hosting::{
    HostConfig, HostLink, HostStatus, HostTarget, PortLease, PortMapConfig, Protocol,
};

/// Port mapping options, shared by every server players join.
#[derive(Debug, Clone, Args)]
pub(crate) struct MapArgs {
    /// Ask the home router to forward this server's ports (PCP, then
    /// NAT-PMP, then UPnP), print where players on the internet connect,
    /// and remove the mapping on exit. Needs `--bind all`.
    #[arg(long)]
    map_port: bool,
    /// With `--map-port`: the gateway PCP and NAT-PMP ask (default: the
    /// default route's gateway).
    #[arg(long, value_name = "IP", requires = "map_port")]
    gateway: Option<IpAddr>,
    /// With `--map-port`: where the UPnP search goes (default SSDP's
    /// group, 239.255.255.250:1900).
    #[arg(long, value_name = "ADDR", requires = "map_port")]
    upnp_search: Option<SocketAddr>,
    /// With `--map-port`: seconds each method may take to answer.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    map_timeout_secs: f64,
}

/// The ports being kept mapped; [`PortMaps::stop`] removes them.
#[derive(Debug, Default)]
pub(crate) struct PortMaps(Vec<PortLease>);

impl MapArgs {
    /// A mapping is for a server the router can reach: not one on loopback.
    pub(crate) fn check(&self, bind: BindScope) -> Result<(), String> {
        if self.map_port && bind == BindScope::Loopback {
            return Err(
                "--map-port needs --bind all: a server on loopback cannot be reached from the router"
                    .into(),
            );
        }
        Ok(())
    }

    /// Starts mapping each `(what, port, protocol)` if `--map-port` was
    /// given (the QUIC port as UDP, the others as TCP); every change is
    /// printed ("port mapping (game port 7000): reachable at ...").
    pub(crate) fn start(&self, ports: &[(&'static str, u16, Protocol)]) -> PortMaps {
        if !self.map_port {
            return PortMaps::default();
        }
        let mut config = PortMapConfig {
            gateway: self.gateway,
            timeout: Duration::try_from_secs_f64(self.map_timeout_secs)
                .unwrap_or(Duration::from_secs(5)),
            ..PortMapConfig::default()
        };
        if let Some(search) = self.upnp_search {
            config.upnp_search = search;
        }
        let mappers = ports.iter().map(|&(what, port, protocol)| {
            let config = PortMapConfig {
                protocol,
                ..config.clone()
            };
            PortLease::start_thread_with(config, port, move |status| {
                // Whoever started the server may have stopped reading its
                // stdout after the ready line: that is not a failure.
                let line = format!("port mapping ({what} port {port}): {status}\n");
                let _ = std::io::Write::write_all(&mut std::io::stdout(), line.as_bytes());
            })
        });
        PortMaps(mappers.collect())
    }
}

impl PortMaps {
    /// Removes every mapping (each bounded by the timeout); the outcome is
    /// printed like the other changes.
    pub(crate) fn stop(self) {
        self.0
            .into_iter()
            .for_each(|mapper| drop(mapper.stop_blocking()));
    }
}

/// The join-code relay option of a game or rooms server.
#[derive(Debug, Clone, Args)]
pub(crate) struct LinkArgs {
    /// Also take players through the join-code relay at HOST:PORT
    /// (`switchboard-server rendezvous`): the code is printed, players
    /// join with `--join CODE@HOST:PORT` or `ws://HOST:WSPORT/CODE`.
    #[arg(long, value_name = "HOST:PORT")]
    rendezvous: Option<String>,
    /// The relay's fingerprint (its `tls: sha256 ...` line): a relay on
    /// another machine is trusted by it alone. Without it: the platform's
    /// roots, then trust on first use (known hosts in the data directory).
    #[arg(long, value_name = "FINGERPRINT", requires = "rendezvous")]
    rendezvous_trust: Option<switchboard::tls::Fingerprint>,
    /// The identity players meet through the relay: the server's own
    /// (`--tls-cert`, `--data-dir`), set by [`with_identity`](Self::with_identity).
    #[arg(skip)]
    identity: Option<switchboard::tls::TlsServer>,
}

impl LinkArgs {
    /// Gives the link the server's identity (`tls`'s), when there is a link:
    /// a player joining by code meets the key the server's own port serves.
    pub(crate) fn with_identity(mut self, tls: &crate::tls_cli::TlsArgs) -> Result<Self, String> {
        if self.rendezvous.is_some() {
            self.identity = Some(tls.identity()?);
        }
        Ok(self)
    }

    /// Links `handle`'s server to the relay, if one was given (within the
    /// server's runtime: the relayed players are its own connections, with
    /// their own addresses). Every change is printed; a listed server
    /// (`--register-with`) shows its code in the tag `join`.
    pub(crate) fn start(&self, handle: &switchboard::ManagerHandle) -> Option<HostLink> {
        let relay = self.rendezvous.clone()?;
        let (attached, listed) = (handle.clone(), handle.clone());
        let attach = move |stream, addr| attached.attach(stream, addr).is_some();
        let link = HostLink::start_with(
            HostConfig {
                identity: self.identity.clone(),
                dialer: match self.rendezvous_trust {
                    Some(relay) => Dialer::default().trust(ServerTrust::pinned(relay)),
                    None => Dialer::default(),
                },
                ..HostConfig::new(relay)
            },
            HostTarget::Attach(Arc::new(attach)),
            move |status| {
                // A listed server shows its code: browsers join with it.
                if let HostStatus::Ready { code, relay, .. } = status {
                    let join = format!("{code}@{relay}");
                    listed.set_listing_tag(switchboard_master::protocol::JOIN_TAG, &join);
                }
                let line = format!("join-code relay: {status}\n");
                let _ = std::io::Write::write_all(&mut std::io::stdout(), line.as_bytes());
            },
        );
        Some(link)
    }
}

/// The ports a server maps: its game (or relay) port and WebSocket port as
/// TCP, its QUIC port as UDP.
pub(crate) fn ports_to_map(
    main: (&'static str, u16),
    websocket: Option<SocketAddr>,
    quic: Option<SocketAddr>,
) -> Vec<(&'static str, u16, Protocol)> {
    let mut ports = vec![(main.0, main.1, Protocol::Tcp)];
    ports.extend(websocket.map(|ws| ("WebSocket", ws.port(), Protocol::Tcp)));
    ports.extend(quic.map(|quic| ("QUIC", quic.port(), Protocol::Udp)));
    ports
}
