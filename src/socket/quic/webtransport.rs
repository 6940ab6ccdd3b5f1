//! WebTransport on the QUIC port, for browsers (on `wtransport`): the same
//! UDP port, the same gate, the same connection over a WebTransport
//! session's bidirectional stream and its datagrams.
//!
//! A browser offers ALPN `h3`; a native client `switchboard`. The TLS
//! handshake picks the certificate by it ([`ByProtocol`]): a browser trusts
//! a self-signed server only by the hash of a certificate valid for at most
//! 14 days (`serverCertificateHashes`), so the port serves browsers
//! short-lived certificates it makes and rotates itself
//! ([`ShortLivedCertificates`]), and native clients the server's identity
//! as before. The hashes to give a page are the current certificate's and
//! the next one's, so a page that learned them keeps working across one
//! rotation.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::tls::{Fingerprint, ServerIdentity};

/// The protocol a browser's WebTransport connection negotiates (ALPN
/// `h3`: HTTP/3).
pub const H3_ALPN: &[u8] = b"h3";

/// The longest a certificate may be valid for a browser to trust it by its
/// hash (the WebTransport specification's two weeks).
pub const MAX_CERTIFICATE_LIFETIME: Duration = Duration::from_secs(14 * 24 * 3600);

/// How far back a certificate's validity starts, for clients whose clocks
/// are a little behind.
const BACKDATE: Duration = Duration::from_secs(3600);

/// The certificate a QUIC port serves browsers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BrowserCertificate {
    /// Short-lived self-signed certificates the server makes and rotates,
    /// trusted by their hashes (`serverCertificateHashes`): for a server
    /// without a certificate browsers trust (default).
    #[default]
    ShortLived,
    /// The server's own TLS identity (`TlsSettings::identity`, `--tls-cert`):
    /// for a CA-issued certificate for the name pages connect to, which
    /// browsers check as for any https site. No hashes are given out.
    Identity,
}

/// WebTransport on a server's QUIC port: browsers connect to
/// `https://host:port/` with the hashes of
/// [`EndpointHandle::webtransport_hashes`](crate::socket::EndpointHandle::webtransport_hashes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebTransportConfig {
    /// Which certificate browsers get (default short-lived ones).
    pub certificate: BrowserCertificate,
    /// How long each certificate is valid (default 13 days; at most
    /// [`MAX_CERTIFICATE_LIFETIME`], and at least two rotations and an hour).
    pub certificate_lifetime: Duration,
    /// How often the port serves a new certificate (default 6 days).
    pub rotate_every: Duration,
    /// Origins pages may connect from, e.g. `https://game.example` (empty:
    /// any; a page with another `Origin` is answered 403).
    pub allowed_origins: Vec<String>,
}

impl Default for WebTransportConfig {
    fn default() -> Self {
        Self {
            certificate: BrowserCertificate::default(),
            certificate_lifetime: Duration::from_secs(13 * 24 * 3600),
            rotate_every: Duration::from_secs(6 * 24 * 3600),
            allowed_origins: Vec::new(),
        }
    }
}

impl WebTransportConfig {
    /// Certificates rotated every `rotate_every`, each valid for
    /// `certificate_lifetime`; every other setting its default.
    pub fn rotating(certificate_lifetime: Duration, rotate_every: Duration) -> Self {
        Self {
            certificate_lifetime,
            rotate_every,
            ..Self::default()
        }
    }

    /// Why these settings cannot work, if they cannot.
    fn check(&self) -> std::io::Result<()> {
        let invalid = |why: String| Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, why));
        if self.certificate_lifetime > MAX_CERTIFICATE_LIFETIME {
            return invalid(format!(
                "WebTransport certificates live at most 14 days (browsers refuse longer), not {:?}",
                self.certificate_lifetime
            ));
        }
        if self.rotate_every.is_zero()
            || self.rotate_every * 2 + BACKDATE > self.certificate_lifetime
        {
            return invalid(format!(
                "WebTransport certificates rotated every {:?} must live at least two rotations \
                 and an hour, not {:?}",
                self.rotate_every, self.certificate_lifetime
            ));
        }
        Ok(())
    }
}

/// One certificate served to browsers and its hash.
#[derive(Debug, Clone)]
struct Served {
    key: Arc<CertifiedKey>,
    hash: Fingerprint,
}

/// The certificates a QUIC port serves browsers: the current one and the
/// next, made ahead so that its hash can be given out before it is served.
#[derive(Debug)]
pub struct ShortLivedCertificates {
    lifetime: Duration,
    served: RwLock<(Served, Served)>,
}

impl ShortLivedCertificates {
    /// Makes the first two certificates.
    pub(super) fn new(config: &WebTransportConfig) -> std::io::Result<Arc<Self>> {
        config.check()?;
        let lifetime = config.certificate_lifetime;
        let pair = (make(lifetime)?, make(lifetime)?);
        Ok(Arc::new(Self {
            lifetime,
            served: RwLock::new(pair),
        }))
    }

    /// The hashes (SHA-256 of the certificate) a page passes as
    /// `serverCertificateHashes`: the certificate served now, then the next.
    pub fn hashes(&self) -> [Fingerprint; 2] {
        let served = self.served.read().expect("certificates lock");
        [served.0.hash, served.1.hash]
    }

    /// Serves the next certificate and makes the one after it.
    pub(super) fn rotate(&self) -> std::io::Result<()> {
        let after = make(self.lifetime)?;
        let mut served = self.served.write().expect("certificates lock");
        let next = std::mem::replace(&mut served.1, after);
        served.0 = next;
        Ok(())
    }

    fn current(&self) -> Arc<CertifiedKey> {
        self.served.read().expect("certificates lock").0.key.clone()
    }

    /// Rotates every `every` until `stop` is cancelled.
    pub(crate) async fn rotating(
        self: Arc<Self>,
        every: Duration,
        stop: tokio_util::sync::CancellationToken,
    ) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            match self.rotate() {
                Ok(()) => {
                    tracing::info!(hashes = ?self.hashes(), "WebTransport certificate rotated")
                }
                Err(err) => tracing::error!(%err, "cannot make a WebTransport certificate"),
            }
        }
    }
}

/// A self-signed ECDSA P-256 certificate valid from an hour ago for
/// `lifetime`.
fn make(lifetime: Duration) -> std::io::Result<Served> {
    let now = time::OffsetDateTime::now_utc();
    let not_before = now - BACKDATE;
    let identity = ServerIdentity::generate_valid(not_before, not_before + lifetime)
        .map_err(std::io::Error::other)?;
    let key = identity.certified_key().map_err(std::io::Error::other)?;
    Ok(Served {
        key: Arc::new(key),
        hash: identity.fingerprint(),
    })
}

/// How a page reaches a server's WebTransport (on its QUIC port): answered
/// to `GET /webtransport` on its WebSocket port as `{"port": 7202,
/// "hashes": ["<64 hex>", ...]}`; the page connects to `https://<its own
/// host>:<port>/`, with `serverCertificateHashes` of those hashes (the
/// certificate served now, then the next; read when asked, so always
/// current), or none when the port serves a certificate browsers trust.
#[derive(Debug, Clone)]
pub struct WebTransportOffer {
    /// The QUIC port (UDP).
    pub port: u16,
    certificates: Option<Arc<ShortLivedCertificates>>,
}

impl PartialEq for WebTransportOffer {
    fn eq(&self, other: &Self) -> bool {
        let same = match (&self.certificates, &other.certificates) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        self.port == other.port && same
    }
}

impl Eq for WebTransportOffer {}

impl WebTransportOffer {
    pub(crate) fn new(port: u16, certificates: Option<Arc<ShortLivedCertificates>>) -> Self {
        Self { port, certificates }
    }

    /// The hashes a page trusts the port's certificate by: the one served
    /// now, then the next; none when it serves a certificate browsers
    /// trust ([`BrowserCertificate::Identity`]).
    pub fn hashes(&self) -> Vec<Fingerprint> {
        self.certificates
            .as_ref()
            .map(|certificates| certificates.hashes().to_vec())
            .unwrap_or_default()
    }

    /// The answer's JSON.
    pub fn json(&self) -> String {
        let hashes: Vec<String> = self
            .hashes()
            .iter()
            .map(|hash| format!("\"{hash}\""))
            .collect();
        format!(
            r#"{{"port":{},"hashes":[{}]}}"#,
            self.port,
            hashes.join(",")
        )
    }

    /// The short-lived certificates, if the port serves them.
    pub(crate) fn certificates(&self) -> Option<&Arc<ShortLivedCertificates>> {
        self.certificates.as_ref()
    }
}

/// Picks a connection's certificate by the protocol its client offers:
/// browsers (`h3`) get the short-lived one, native clients the server's
/// identity.
#[derive(Debug)]
pub(super) struct ByProtocol {
    pub(super) native: Arc<dyn ResolvesServerCert>,
    pub(super) webtransport: Arc<ShortLivedCertificates>,
}

impl ResolvesServerCert for ByProtocol {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let browser = hello
            .alpn()
            .is_some_and(|mut offered| offered.any(|alpn| alpn == H3_ALPN));
        if browser {
            Some(self.webtransport.current())
        } else {
            self.native.resolve(hello)
        }
    }
}

/// Whether a connection being accepted negotiated WebTransport.
pub(super) async fn is_webtransport(connecting: &mut quinn::Connecting) -> bool {
    let Ok(data) = connecting.handshake_data().await else {
        return false;
    };
    data.downcast::<quinn::crypto::rustls::HandshakeData>()
        .is_ok_and(|data| data.protocol.as_deref() == Some(H3_ALPN))
}

/// A browser's session, accepted: its HTTP/3 handshake (SETTINGS, the
/// CONNECT request, whose `Origin` must be allowed), then the one
/// bidirectional stream it opens for the connection.
pub(super) async fn open(
    connecting: quinn::Connecting,
    allowed_origins: &[String],
) -> std::io::Result<(
    wtransport::Connection,
    wtransport::SendStream,
    wtransport::RecvStream,
)> {
    let request = wtransport::endpoint::IncomingSessionFuture::with_quic_connecting(connecting)
        .await
        .map_err(std::io::Error::other)?;
    let allowed = allowed_origins.is_empty()
        || request.origin().is_some_and(|origin| {
            allowed_origins
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(origin))
        });
    if !allowed {
        let origin = request.origin().unwrap_or("none").to_string();
        request.forbidden().await;
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("WebTransport from the origin {origin}, which is not allowed"),
        ));
    }
    let session = request.accept().await.map_err(std::io::Error::other)?;
    let (send, recv) = session.accept_bi().await.map_err(std::io::Error::other)?;
    Ok((session, send, recv))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotation_serves_the_next_certificate_whose_hash_was_given_out() {
        let certs = ShortLivedCertificates::new(&WebTransportConfig::default()).unwrap();
        let [current, next] = certs.hashes();
        assert_ne!(current, next);
        certs.rotate().unwrap();
        let [now, after] = certs.hashes();
        assert_eq!(now, next);
        assert!(after != current && after != next);
        let served = certs.current();
        assert_eq!(Fingerprint::of(&served.cert[0]), now);
    }

    #[test]
    fn certificates_a_browser_would_refuse_are_refused_at_start() {
        let too_long =
            WebTransportConfig::rotating(MAX_CERTIFICATE_LIFETIME * 2, Duration::from_secs(3600));
        let err = ShortLivedCertificates::new(&too_long).unwrap_err();
        assert!(err.to_string().contains("at most 14 days"), "{err}");
        let rotated_too_late = WebTransportConfig::rotating(
            Duration::from_secs(10 * 3600),
            Duration::from_secs(5 * 3600),
        );
        let err = ShortLivedCertificates::new(&rotated_too_late).unwrap_err();
        assert!(err.to_string().contains("two rotations"), "{err}");
    }
}
