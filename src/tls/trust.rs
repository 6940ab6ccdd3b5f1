//! How a client decides that the server it reached is the one it meant,
//! in order: a certificate the platform's roots vouch for (a CA-issued
//! certificate for the name dialed); a fingerprint pinned for it (from an
//! authenticated listing, a join code's rendezvous, a connect token, the
//! player's `--trust`); or trust on first use, remembered in a known-hosts
//! file as ssh does (a changed key is refused, saying what changed and how
//! to accept it).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::{Fingerprint, TlsError};

/// Where a client's trust in servers comes from. The default trusts the
/// platform's roots, then first use, remembered in
/// `known_hosts` of the default data directory
/// ([`default_data_dir`](super::default_data_dir)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTrust {
    platform_roots: bool,
    /// Certificate authorities trusted besides the platform's (an
    /// operator's own CA for a fleet), DER.
    roots: Vec<CertificateDer<'static>>,
    pinned: Vec<Fingerprint>,
    known_hosts: Option<PathBuf>,
    /// Any certificate (its signature still checked): only for a server on
    /// this machine, whose QUIC port has a certificate made at start that
    /// no client can know; nothing said to it leaves the machine.
    any: bool,
}

impl Default for ServerTrust {
    fn default() -> Self {
        Self {
            platform_roots: true,
            roots: Vec::new(),
            pinned: Vec::new(),
            known_hosts: Some(super::default_data_dir().join("known_hosts")),
            any: false,
        }
    }
}

impl ServerTrust {
    /// Trusts only a server whose certificate has this fingerprint (and
    /// any the platform's roots vouch for).
    pub fn pinned(fingerprint: Fingerprint) -> Self {
        Self {
            platform_roots: true,
            roots: Vec::new(),
            pinned: vec![fingerprint],
            known_hosts: None,
            any: false,
        }
    }

    /// Trusts nothing but what is added ([`pin`](Self::pin),
    /// [`known_hosts`](Self::known_hosts)): not even the platform's roots.
    pub fn nothing() -> Self {
        Self {
            platform_roots: false,
            roots: Vec::new(),
            pinned: Vec::new(),
            known_hosts: None,
            any: false,
        }
    }

    /// Any certificate: for a QUIC server on this machine only (see
    /// `any`).
    pub(crate) fn this_machine() -> Self {
        Self {
            any: true,
            ..Self::nothing()
        }
    }

    /// Trusts a server with this fingerprint too. With a pin, trust on
    /// first use is off: a server that is not the pinned one is refused.
    pub fn pin(mut self, fingerprint: Fingerprint) -> Self {
        self.pinned.push(fingerprint);
        self
    }

    /// Trusts on first use, remembering servers' fingerprints in `path`
    /// (a line `host:port fingerprint` each).
    pub fn known_hosts(mut self, path: impl Into<PathBuf>) -> Self {
        self.known_hosts = Some(path.into());
        self
    }

    /// Trusts servers whose certificate `authority` (DER) issued for the
    /// name dialed, besides the platform's roots: an operator's own CA.
    pub fn root(mut self, authority: impl Into<Vec<u8>>) -> Self {
        self.roots.push(CertificateDer::from(authority.into()));
        self
    }

    /// Whether the platform's roots vouch for servers (default yes).
    pub fn platform_roots(mut self, on: bool) -> Self {
        self.platform_roots = on;
        self
    }

    /// The verifier for one server, `host:port` as dialed.
    pub(super) fn verifier(&self, target: &str, provider: &Arc<CryptoProvider>) -> Verifier {
        Verifier {
            roots: authorities(self.platform_roots, &self.roots, provider),
            pinned: self.pinned.clone(),
            known_hosts: (self.pinned.is_empty())
                .then(|| self.known_hosts.clone())
                .flatten(),
            target: target.to_string(),
            provider: provider.clone(),
            seen: Mutex::new(None),
            refused: Mutex::new(None),
            any: self.any,
        }
    }
}

/// The certificate authorities a client trusts as a verifier: the
/// platform's (read once: a few milliseconds) when `platform`, and `extra`;
/// `None` if there are none.
fn authorities(
    platform: bool,
    extra: &[CertificateDer<'static>],
    provider: &Arc<CryptoProvider>,
) -> Option<Arc<WebPkiServerVerifier>> {
    static PLATFORM: OnceLock<Arc<rustls::RootCertStore>> = OnceLock::new();
    let platform = platform.then(|| {
        PLATFORM.get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            let mut store = rustls::RootCertStore::empty();
            store.add_parsable_certificates(found.certs);
            Arc::new(store)
        })
    });
    let store = match (platform, extra.is_empty()) {
        (Some(store), true) => store.clone(),
        (platform, _) => {
            let mut store = platform.map_or_else(rustls::RootCertStore::empty, |s| (**s).clone());
            store.add_parsable_certificates(extra.iter().cloned());
            Arc::new(store)
        }
    };
    if store.is_empty() {
        return None;
    }
    WebPkiServerVerifier::builder_with_provider(store, provider.clone())
        .build()
        .ok()
}

/// Checks one server's certificate by a [`ServerTrust`]; the handshake's
/// signature by the provider, so a copied certificate without its key is
/// refused.
#[derive(Debug)]
pub(crate) struct Verifier {
    roots: Option<Arc<WebPkiServerVerifier>>,
    pinned: Vec<Fingerprint>,
    known_hosts: Option<PathBuf>,
    target: String,
    provider: Arc<CryptoProvider>,
    /// The fingerprint of the certificate the server presented.
    pub(crate) seen: Mutex<Option<Fingerprint>>,
    /// Why it refused the certificate, if it did: said to the player by
    /// a transport whose error cannot carry rustls's (QUIC's).
    pub(crate) refused: Mutex<Option<String>>,
    /// Any certificate will do (`ServerTrust::this_machine`).
    any: bool,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let presented = Fingerprint::of(end_entity);
        *self.seen.lock().expect("seen lock") = Some(presented);
        if self.any {
            return Ok(ServerCertVerified::assertion());
        }
        if let Some(roots) = &self.roots {
            let vouched = roots.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            );
            if vouched.is_ok() {
                return vouched;
            }
        }
        if self.pinned.contains(&presented) {
            return Ok(ServerCertVerified::assertion());
        }
        let refuse = |err: TlsError| {
            *self.refused.lock().expect("refused lock") = Some(err.to_string());
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Other(rustls::OtherError(Arc::new(err))),
            ))
        };
        if !self.pinned.is_empty() {
            return refuse(TlsError::NotPinned {
                server: self.target.clone(),
                presented,
                pinned: self.pinned[0],
            });
        }
        let Some(path) = &self.known_hosts else {
            return refuse(TlsError::Untrusted {
                server: self.target.clone(),
                presented,
            });
        };
        match KnownHosts::check(path, &self.target, presented) {
            Ok(()) => Ok(ServerCertVerified::assertion()),
            Err(err) => refuse(err),
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // Only TLS 1.3 is offered.
        Err(rustls::Error::PeerIncompatible(
            rustls::PeerIncompatible::Tls13RequiredForQuic,
        ))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A known-hosts file: a line `host:port fingerprint` for each server
/// trusted on first use; `#` starts a comment.
pub struct KnownHosts;

/// Lines a known-hosts file may have before it is refused as corrupt
/// rather than read whole.
const MAX_KNOWN_HOSTS: usize = 100_000;

impl KnownHosts {
    /// The fingerprint remembered for `server` (`host:port`) in `path`.
    pub fn lookup(path: &Path, server: &str) -> Result<Option<Fingerprint>, TlsError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => {
                return Err(TlsError::Io {
                    path: path.to_path_buf(),
                    err,
                })
            }
        };
        for line in text.lines().take(MAX_KNOWN_HOSTS) {
            let line = line.trim();
            if line.starts_with('#') {
                continue;
            }
            if let Some((host, fingerprint)) = line.split_once(char::is_whitespace) {
                if host == server {
                    return fingerprint.trim().parse().map(Some);
                }
            }
        }
        Ok(None)
    }

    /// Accepts `presented` for `server` if it is the one remembered, or
    /// remembers it if none is (first use: logged with the fingerprint);
    /// refuses a different one, saying what changed and how to accept it.
    pub fn check(path: &Path, server: &str, presented: Fingerprint) -> Result<(), TlsError> {
        // One check at a time in this process: two first connections to
        // one server write one line.
        static WRITING: Mutex<()> = Mutex::new(());
        let _writing = WRITING.lock().unwrap_or_else(|e| e.into_inner());
        match Self::lookup(path, server)? {
            Some(known) if known == presented => Ok(()),
            Some(known) => Err(TlsError::KeyChanged {
                server: server.to_string(),
                known,
                presented,
                file: path.to_path_buf(),
            }),
            None => {
                Self::remember(path, server, presented)?;
                tracing::warn!(
                    server,
                    fingerprint = %presented,
                    file = %path.display(),
                    "first connection to this server: its key is trusted from now on \
                     (compare the fingerprint with the one the server printed)"
                );
                Ok(())
            }
        }
    }

    /// Adds `server`'s fingerprint to `path` (made if missing).
    pub fn remember(path: &Path, server: &str, fingerprint: Fingerprint) -> Result<(), TlsError> {
        use std::io::Write;
        let io = |err| TlsError::Io {
            path: path.to_path_buf(),
            err,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        writeln!(file, "{server} {fingerprint}").map_err(io)
    }

    /// Forgets `server` (the way to accept its new key): every line of
    /// it is removed.
    pub fn forget(path: &Path, server: &str) -> Result<(), TlsError> {
        let io = |err| TlsError::Io {
            path: path.to_path_buf(),
            err,
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(err) => return Err(io(err)),
        };
        let kept: String = text
            .lines()
            .filter(|line| line.split_whitespace().next() != Some(server))
            .map(|line| format!("{line}\n"))
            .collect();
        std::fs::write(path, kept).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str) -> PathBuf {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).unwrap();
        std::env::temp_dir().join(format!("switchboard-{name}-{}", Fingerprint::of(&bytes)))
    }

    #[test]
    fn known_hosts_remembers_the_first_key_and_refuses_a_changed_one() {
        let path = temp_file("known-hosts");
        let (first, other) = (Fingerprint::of(b"one"), Fingerprint::of(b"two"));
        KnownHosts::check(&path, "game.example:7100", first).unwrap();
        KnownHosts::check(&path, "game.example:7100", first).unwrap();
        // Another port is another server.
        KnownHosts::check(&path, "game.example:7101", other).unwrap();
        let err = KnownHosts::check(&path, "game.example:7100", other).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&first.to_string()) && text.contains(&other.to_string()),
            "{text}"
        );
        assert!(
            text.contains("--forget-host"),
            "says how to accept it: {text}"
        );
        KnownHosts::forget(&path, "game.example:7100").unwrap();
        KnownHosts::check(&path, "game.example:7100", other).unwrap();
        assert_eq!(
            KnownHosts::lookup(&path, "game.example:7101").unwrap(),
            Some(other)
        );
        std::fs::remove_file(&path).unwrap();
    }
}
