//! One listed server as a browser gets it: its address, what it said, and
//! what its tags mean (a join code, its fingerprint, the transports it
//! offers).

use serde::{Deserialize, Serialize};

use super::ServerInfo;

/// One listed server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    /// Where it answered from (its game address).
    pub addr: std::net::SocketAddr,
    /// What it said about itself.
    pub info: ServerInfo,
}

/// The tag a server hosted through a join-code relay lists its code in:
/// `join=K7PQ2M@relay.example.org:7400` (`docs/HOSTING.md`).
pub const JOIN_TAG: &str = "join";

impl Listed {
    /// Where a player connects to it: the join code at its relay when it
    /// lists one (a game hosted behind a router), else its address.
    pub fn join_addr(&self) -> String {
        self.info
            .tags
            .iter()
            .find(|(key, value)| {
                key == JOIN_TAG && switchboard_proto::join_code::split_join_addr(value).is_some()
            })
            .map_or_else(|| self.addr.to_string(), |(_, value)| value.clone())
    }

    /// The TLS fingerprint it lists (`switchboard::manager::TLS_TAG`), if
    /// any: a player pins the server by it, as far as it trusts the master
    /// the list came from (docs/SECURITY.md).
    pub fn fingerprint(&self) -> Option<switchboard::tls::Fingerprint> {
        self.tag(switchboard::manager::TLS_TAG)
    }

    /// Every way into it, TCP first: its game port (TCP), and the
    /// WebSocket and QUIC ports it lists (`switchboard::manager::WS_TAG`,
    /// `QUIC_TAG`), each with the fingerprint a player pins it by (one
    /// identity serves them all). A tag that is not a port is skipped.
    pub fn transports(&self) -> Vec<Offered> {
        let fingerprint = self.fingerprint();
        let tagged = |tag: &str| {
            self.info
                .tags
                .iter()
                .find(|(key, _)| key == tag)
                .and_then(|(_, value)| value.parse::<u16>().ok())
                .filter(|port| *port != 0)
                .map(|port| std::net::SocketAddr::new(self.addr.ip(), port))
        };
        let mut offered = vec![Offered {
            transport: ListedTransport::Tcp,
            addr: self.addr,
            fingerprint,
        }];
        for (transport, tag) in [
            (ListedTransport::WebSocket, switchboard::manager::WS_TAG),
            (ListedTransport::Quic, switchboard::manager::QUIC_TAG),
        ] {
            offered.extend(tagged(tag).map(|addr| Offered {
                transport,
                addr,
                fingerprint,
            }));
        }
        // WebTransport on the QUIC port, trusted by its short-lived
        // certificate's hash, or (`ca`) as any https site.
        let wt = self
            .info
            .tags
            .iter()
            .find(|(key, _)| key == switchboard::manager::WT_TAG);
        let trusted = wt.and_then(|(_, value)| match value.as_str() {
            switchboard::manager::WT_CA => Some(None),
            hash => hash.parse().ok().map(Some),
        });
        if let (Some(addr), Some(fingerprint)) = (tagged(switchboard::manager::QUIC_TAG), trusted) {
            offered.push(Offered {
                transport: ListedTransport::WebTransport,
                addr,
                fingerprint,
            });
        }
        offered
    }

    /// The hashes of the certificates its WebTransport serves browsers
    /// (`switchboard::manager::WT_TAG`, then `WT_NEXT_TAG`): what a page
    /// passes as `serverCertificateHashes`. Empty without WebTransport.
    pub fn webtransport_hashes(&self) -> Vec<switchboard::tls::Fingerprint> {
        [
            switchboard::manager::WT_TAG,
            switchboard::manager::WT_NEXT_TAG,
        ]
        .into_iter()
        .filter_map(|tag| self.tag(tag))
        .collect()
    }

    /// A tag's value read as a fingerprint, if it is one.
    fn tag(&self, tag: &str) -> Option<switchboard::tls::Fingerprint> {
        self.info
            .tags
            .iter()
            .find(|(key, _)| key == tag)
            .and_then(|(_, value)| value.parse().ok())
    }
}

/// A transport a listed server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ListedTransport {
    /// The game port: the framed protocol over TCP (in TLS with a
    /// fingerprint).
    Tcp,
    /// The same frames, one per WebSocket message.
    WebSocket,
    /// QUIC: a stream for the frames, datagrams for sequenced channels.
    Quic,
    /// WebTransport on the QUIC port, for browsers: the same stream and
    /// datagrams in an HTTP/3 session; its fingerprint is the hash of the
    /// certificate it serves browsers now (none: a certificate browsers
    /// trust, `wt=ca`).
    WebTransport,
}

impl ListedTransport {
    /// Its name in a listing: `tcp`, `ws`, `quic`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::WebSocket => "ws",
            Self::Quic => "quic",
            Self::WebTransport => "webtransport",
        }
    }
}

/// One way into a listed server ([`Listed::transports`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offered {
    /// Which transport.
    pub transport: ListedTransport,
    /// Where.
    pub addr: std::net::SocketAddr,
    /// The fingerprint its TLS identity has, if it lists one.
    pub fingerprint: Option<switchboard::tls::Fingerprint>,
}

impl Offered {
    /// The address a client dials (`Dialer`, `NetworkClient::connect`):
    /// `tls://host:port` or `host:port`, `wss://` or `ws://host:port/`,
    /// `quic://host:port`; for a browser's WebTransport `https://host:port/`.
    pub fn url(&self) -> String {
        let secure = self.fingerprint.is_some();
        match (self.transport, secure) {
            (ListedTransport::Tcp, true) => format!("tls://{}", self.addr),
            (ListedTransport::Tcp, false) => self.addr.to_string(),
            (ListedTransport::WebSocket, true) => format!("wss://{}/", self.addr),
            (ListedTransport::WebSocket, false) => format!("ws://{}/", self.addr),
            (ListedTransport::Quic, _) => format!("quic://{}", self.addr),
            (ListedTransport::WebTransport, _) => format!("https://{}/", self.addr),
        }
    }
}
