//! [`TlsSettings`]: how a listener speaks to other machines, the one
//! setting every server's config holds.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::{ServerIdentity, TlsServer};

/// How a listener speaks to other machines: every listening config holds
/// one (the game's ports, the admin server, the relay's JSON lines, the
/// AxisPy port). On loopback none of it applies: nothing leaves the
/// machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// The identity served (default none: the server's own, from
    /// `data_dir`).
    pub identity: Option<TlsServer>,
    /// Speak plaintext to other machines (default false), logged as a
    /// warning at start: for a network the operator trusts end to end, or
    /// a TLS proxy in front.
    pub insecure_plaintext: bool,
    /// Where a server without `identity` keeps its own key and self-signed
    /// certificate (default [`default_data_dir`](super::default_data_dir)):
    /// made there on first start, readable by its owner only, so that its
    /// fingerprint survives restarts.
    pub data_dir: Option<PathBuf>,
}

impl TlsSettings {
    /// Serves `identity` to other machines.
    pub fn serving(identity: TlsServer) -> Self {
        Self {
            identity: Some(identity),
            ..Self::default()
        }
    }

    /// Speaks plaintext to other machines (see
    /// [`insecure_plaintext`](Self::insecure_plaintext)).
    pub fn insecure_plaintext() -> Self {
        Self {
            insecure_plaintext: true,
            ..Self::default()
        }
    }

    /// The TLS a listener bound to `addr` speaks: none on loopback;
    /// elsewhere `identity`, or else the server's own from `data_dir`
    /// (made on first start); none when the operator chose plaintext
    /// (logged as a warning). An identity that cannot be read or made is
    /// an error that says where and why.
    pub fn for_address(&self, addr: SocketAddr) -> std::io::Result<Option<TlsServer>> {
        if super::is_loopback(addr.ip()) {
            return Ok(None);
        }
        if self.insecure_plaintext {
            tracing::warn!(
                %addr,
                "INSECURE PLAINTEXT: this listener is reachable from other machines and \
                 encrypts nothing (passwords, tokens and every message travel in the clear)"
            );
            return Ok(None);
        }
        let tls = match &self.identity {
            Some(tls) => tls.clone(),
            None => {
                let dir = self
                    .data_dir
                    .clone()
                    .unwrap_or_else(super::default_data_dir);
                ServerIdentity::load_or_create(&dir)
                    .and_then(|identity| TlsServer::new(&identity))
                    .map_err(|err| {
                        std::io::Error::other(format!(
                            "cannot listen on {addr} with TLS (this server's identity in {}): \
                             {err}",
                            dir.display()
                        ))
                    })?
            }
        };
        tracing::info!(%addr, fingerprint = %tls.fingerprint(), "listening with TLS");
        Ok(Some(tls))
    }
}
