//! `--tls-cert`, `--tls-key`, `--data-dir` and `--insecure-plaintext`:
//! how a mode that listens beyond loopback speaks TLS, shared by every mode
//! with a game port.

use clap::Args;
use switchboard::socket::BindScope;
use switchboard::tls::{
    default_data_dir, is_loopback, Fingerprint, ServerIdentity, ServerTrust, TlsClient, TlsServer,
    TlsSettings,
};
use switchboard::EndpointConfig;

/// A server's TLS options.
#[derive(Debug, Args, Clone)]
pub(crate) struct TlsArgs {
    /// The server's certificate chain (PEM), e.g. one a CA issued for its
    /// public name; with `--tls-key`. Without them the server makes its own
    /// key and self-signed certificate in `--data-dir` on first start and
    /// prints its fingerprint for players to pin.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The private key of `--tls-cert` (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Where the server keeps its own identity (default
    /// $SWITCHBOARD_DATA_DIR, else $XDG_DATA_HOME/switchboard, else
    /// ~/.local/share/switchboard).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<std::path::PathBuf>,
    /// Speak plaintext to other machines: passwords, reconnect tokens and
    /// every message travel in the clear. For a network you trust end to
    /// end, or a TLS proxy in front. Logged as a warning at start.
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    insecure_plaintext: bool,
}

impl TlsArgs {
    /// Puts the server's TLS into `server` for a server bound to `scope`
    /// (see [`settings`](Self::settings)).
    pub(crate) fn apply(
        &self,
        server: &mut EndpointConfig,
        scope: BindScope,
    ) -> Result<(), String> {
        server.tls = self.settings(scope)?;
        // The operator's certificate (a CA-issued one for the server's
        // name) is one browsers trust: WebTransport serves it too.
        let web = server
            .quic
            .as_mut()
            .and_then(|quic| quic.webtransport.as_mut());
        if let (Some(web), Some(_), false) = (web, &self.tls_cert, scope == BindScope::Loopback) {
            web.certificate = switchboard::socket::quic::webtransport::BrowserCertificate::Identity;
        }
        Ok(())
    }

    /// The TLS of a server bound to `scope`, its fingerprint printed (a
    /// line `tls: sha256 FINGERPRINT` on stdout) for its operator to give
    /// to players. Nothing on loopback.
    pub(crate) fn settings(&self, scope: BindScope) -> Result<TlsSettings, String> {
        if scope == BindScope::Loopback {
            return Ok(TlsSettings::default());
        }
        if self.insecure_plaintext {
            return Ok(TlsSettings::insecure_plaintext());
        }
        let tls = self.identity()?;
        // Whoever started the server may have stopped reading its stdout.
        let _ = std::io::Write::write_fmt(
            &mut std::io::stdout(),
            format_args!("tls: sha256 {}\n", tls.fingerprint()),
        );
        Ok(TlsSettings::serving(tls))
    }

    /// The identity the server presents: `--tls-cert` and `--tls-key`, or
    /// its own from `--data-dir` (made on first start).
    pub(crate) fn identity(&self) -> Result<TlsServer, String> {
        let identity = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => ServerIdentity::from_pem_files(cert, key),
            _ => {
                let dir = self.data_dir.clone().unwrap_or_else(default_data_dir);
                ServerIdentity::load_or_create(&dir)
            }
        }
        .map_err(|e| format!("TLS identity: {e}"))?;
        TlsServer::new(&identity).map_err(|e| format!("TLS identity: {e}"))
    }
}

/// A client mode's TLS options (the bots, the load tester).
#[derive(Debug, Args, Clone)]
pub(crate) struct ClientTlsArgs {
    /// Speak TLS even to a server on this machine (a server beyond
    /// loopback is always spoken to in TLS).
    #[arg(long)]
    tls: bool,
    /// The server's fingerprint (`tls: sha256 ...` in its output): it is
    /// trusted by it alone. Without it: the platform's roots, then trust on
    /// first use (known hosts in the data directory).
    #[arg(long, value_name = "FINGERPRINT")]
    trust: Option<Fingerprint>,
    /// Speak plaintext to a server on another machine: everything travels
    /// in the clear.
    #[arg(long, conflicts_with_all = ["tls", "trust"])]
    insecure_plaintext: bool,
}

impl ClientTlsArgs {
    /// The TLS to speak to a server at `ip`: none to loopback (unless
    /// `--tls`) or with `--insecure-plaintext`.
    pub(crate) fn client_for(&self, ip: std::net::IpAddr) -> Option<TlsClient> {
        if self.insecure_plaintext || (is_loopback(ip) && !self.tls && self.trust.is_none()) {
            return None;
        }
        Some(TlsClient::new(match self.trust {
            Some(fingerprint) => ServerTrust::pinned(fingerprint),
            None => ServerTrust::default(),
        }))
    }
}
