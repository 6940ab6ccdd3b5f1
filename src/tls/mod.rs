//! TLS 1.3 for every connection that leaves this machine (rustls, on the
//! `ring` provider).
//!
//! A server bound to loopback speaks plain frames and pays nothing: nothing
//! it says leaves the machine. A server bound to any other address serves
//! TLS with its [`ServerIdentity`] (the operator's certificate, or its own
//! key and self-signed certificate, made on first start and kept in a data
//! directory) and refuses plaintext from other machines with a close that
//! says why; opting out is [`TlsSettings::insecure_plaintext`]
//! (`--insecure-plaintext`), logged as a warning at start. Connections from
//! this machine may still speak plain to it (the host's own game), which it
//! tells from TLS by the first byte.
//!
//! A client dials TLS to any address that is not loopback (or `tls://`,
//! `wss://`), and checks the server by its [`ServerTrust`]: the platform's
//! roots, a pinned [`Fingerprint`], or trust on first use remembered in a
//! known-hosts file ([`KnownHosts`]).
//!
//! ## Layout
//! - `identity`: [`ServerIdentity`] (PEM files, or made and kept in a data
//!   directory), its [`Fingerprint`], [`default_data_dir`].
//! - `trust`: [`ServerTrust`] and the certificate check it makes,
//!   [`KnownHosts`].
//! - `server`: [`TlsServer`], and [`accept`], a listener's first step: TLS,
//!   plain from this machine, or plaintext refused ([`secure`] and
//!   [`Secured`] for listeners whose protocol is not the game's).
//! - `session`: [`TlsStream`], a server's session on rustls's unbuffered
//!   API: buffers let go when empty, shared by a connection's reader, its
//!   writer and senders writing directly.
//! - `client`: [`TlsClient`], the client's handshake, with errors that name
//!   their cause (a plaintext server, a changed key).
//! - `settings`: [`TlsSettings`], how a listener speaks to other machines
//!   (every server's config holds one).

mod client;
mod identity;
mod server;
mod session;
mod settings;
mod trust;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

pub(crate) use client::server_name;
pub use client::{ClientTlsStream, Recorded, TlsClient};
pub use identity::{default_data_dir, Fingerprint, ServerIdentity, IDENTITY_FILE};
pub use server::{accept, secure, Accepted, Secured, TlsServer, PLAINTEXT_REFUSED};
pub use session::TlsStream;
pub use settings::TlsSettings;
pub(crate) use trust::Verifier;
pub use trust::{KnownHosts, ServerTrust};

/// What can go wrong with TLS settings and identities.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read or written.
    #[error("{}: {err}", path.display())]
    Io {
        /// Which file.
        path: PathBuf,
        /// What happened.
        err: std::io::Error,
    },
    /// PEM text that holds no usable certificate or key.
    #[error("bad PEM: {0}")]
    BadPem(String),
    /// A fingerprint that is not 64 hex digits.
    #[error("not a SHA-256 fingerprint (64 hex digits): {0:?}")]
    BadFingerprint(String),
    /// Making a key or certificate failed.
    #[error("cannot make a key and certificate: {0}")]
    Generate(String),
    /// rustls refused the settings (a key that does not match its
    /// certificate, say).
    #[error("TLS settings refused: {0}")]
    Settings(#[from] rustls::Error),
    /// The server presented another key than the one pinned for it.
    #[error(
        "{server} presented the key {presented}, not the pinned {pinned}: \
         someone may be in the middle, or the server has a new key (get its \
         fingerprint from its operator)"
    )]
    NotPinned {
        /// The server as dialed.
        server: String,
        /// What it presented.
        presented: Fingerprint,
        /// What was pinned.
        pinned: Fingerprint,
    },
    /// The server's key is not the one remembered for it.
    #[error(
        "THE KEY OF {server} HAS CHANGED: it was {known}, it is now {presented}. \
         Someone may be in the middle, or the server made a new key. If its \
         operator confirms the new fingerprint, forget the old one \
         (`--forget-host {server}`, or delete its line in {}) and connect again",
        file.display()
    )]
    KeyChanged {
        /// The server as dialed.
        server: String,
        /// The fingerprint remembered.
        known: Fingerprint,
        /// The fingerprint presented.
        presented: Fingerprint,
        /// The known-hosts file.
        file: PathBuf,
    },
    /// Nothing vouches for the server's key.
    #[error(
        "{server} presented the key {presented}, which nothing here trusts \
         (no CA vouches for it, it is not pinned, and trust on first use is off): \
         pin it with --trust {presented} if its operator confirms it"
    )]
    Untrusted {
        /// The server as dialed.
        server: String,
        /// What it presented.
        presented: Fingerprint,
    },
}

/// The crypto provider of every TLS session here (ring).
#[allow(
    deprecated,
    reason = "ring's provider offers no post-quantum key exchange (aws-lc-rs's does, but needs \
              cmake and minutes to build): X25519 and the NIST curves it has are today's TLS 1.3"
)]
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    static PROVIDER: OnceLock<Arc<rustls::crypto::CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| {
            use rustls::crypto::ring::{cipher_suite, kx_group};
            Arc::new(rustls::crypto::CryptoProvider {
                // X25519 first: P-384 (which this rustls's ring provider
                // negotiated) took ten times the CPU of a handshake, its
                // arithmetic generic in ring (`benches/tls.rs`).
                kx_groups: vec![kx_group::X25519, kx_group::SECP256R1],
                cipher_suites: vec![
                    cipher_suite::TLS13_AES_128_GCM_SHA256,
                    cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
                    cipher_suite::TLS13_AES_256_GCM_SHA384,
                ],
                ..rustls::crypto::ring::default_provider()
            })
        })
        .clone()
}

/// Whether `ip` is this machine's (127.0.0.0/8, ::1, or an IPv4 loopback
/// address mapped into IPv6): what never leaves the machine.
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Whether the host of `host:port` (or `[v6]:port`, or a bare host) is
/// this machine: `localhost` or a loopback address. Any other name counts
/// as another machine.
pub fn is_loopback_host(addr: &str) -> bool {
    let host = host_of(addr);
    host.eq_ignore_ascii_case("localhost") || host.parse().is_ok_and(is_loopback)
}

/// The host of `host:port`, `[v6]:port`, a bare host or a bare IPv6
/// address; of a join code's `CODE@host:port`, the relay's host.
pub(crate) fn host_of(addr: &str) -> &str {
    let addr = addr.rsplit_once('@').map_or(addr, |(_, at)| at);
    match addr.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => match addr.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') && port.parse::<u16>().is_ok() => host,
            _ => addr,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_told_from_other_machines_in_every_form() {
        for local in [
            "127.0.0.1:7100",
            "localhost:1",
            "[::1]:80",
            "127.8.9.1",
            "::1",
        ] {
            assert!(is_loopback_host(local), "{local}");
        }
        for remote in [
            "10.0.0.1:7100",
            "game.example:7100",
            "[2001:db8::1]:9",
            "0.0.0.0:1",
        ] {
            assert!(!is_loopback_host(remote), "{remote}");
        }
        assert!(is_loopback("::ffff:127.0.0.1".parse().unwrap()));
    }
}
