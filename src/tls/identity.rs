//! A server's identity: its certificate chain and key, from the operator's
//! PEM files or made on first start and kept in a data directory, and the
//! SHA-256 fingerprint clients pin it by.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};

use super::TlsError;

/// The file, in a data directory, that holds a server's own key and
/// self-signed certificate (PEM, readable by its owner only).
pub const IDENTITY_FILE: &str = "identity.pem";

/// The SHA-256 of a certificate's DER bytes: what a client pins a server
/// by. Written as 64 lowercase hex digits; read with or without a
/// `sha256:` prefix and colons between the bytes, in either case.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The fingerprint of a certificate (its DER bytes).
    pub fn of(certificate: &[u8]) -> Self {
        Self(Sha256::digest(certificate).into())
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl FromStr for Fingerprint {
    type Err = TlsError;

    fn from_str(text: &str) -> Result<Self, TlsError> {
        let bad = || TlsError::BadFingerprint(text.chars().take(100).collect());
        let trimmed = text.trim();
        let hex = trimmed
            .strip_prefix("sha256:")
            .or_else(|| trimmed.strip_prefix("SHA256:"))
            .unwrap_or(trimmed);
        let digits: Vec<u8> = hex.bytes().filter(|&b| b != b':').collect();
        if digits.len() != 64 {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(digits.chunks(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Ok(Self(out))
    }
}

/// A server's certificate chain (its own certificate first) and private key.
pub struct ServerIdentity {
    pub(super) chain: Vec<CertificateDer<'static>>,
    pub(super) key: PrivateKeyDer<'static>,
    fingerprint: Fingerprint,
}

impl fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerIdentity")
            .field("fingerprint", &self.fingerprint)
            .field("chain", &self.chain.len())
            .finish_non_exhaustive()
    }
}

impl ServerIdentity {
    /// The operator's certificate chain and key, from PEM files (a
    /// CA-issued certificate for a public name, or any other).
    pub fn from_pem_files(certificate: &Path, key: &Path) -> Result<Self, TlsError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|err| TlsError::Io {
                path: path.to_path_buf(),
                err,
            })
        };
        Self::from_pem(&read(certificate)?, &read(key)?)
    }

    /// A certificate chain and key from PEM text (both may be in one text).
    pub fn from_pem(certificates: &[u8], key: &[u8]) -> Result<Self, TlsError> {
        let chain = CertificateDer::pem_slice_iter(certificates)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| TlsError::BadPem(format!("certificates: {err}")))?;
        if chain.is_empty() {
            return Err(TlsError::BadPem("no certificate in it".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|err| TlsError::BadPem(format!("private key: {err}")))?;
        let fingerprint = Fingerprint::of(&chain[0]);
        Ok(Self {
            chain,
            key,
            fingerprint,
        })
    }

    /// A fresh ECDSA P-256 key and a self-signed certificate for it, valid
    /// for ten years (clients trust it by its fingerprint, not its dates).
    pub fn generate() -> Result<Self, TlsError> {
        Self::generate_valid(TEN_YEARS.0, TEN_YEARS.1)
    }

    /// A fresh ECDSA P-256 key and a self-signed certificate valid from
    /// `not_before` to `not_after`: what a browser accepts by its hash
    /// (WebTransport's `serverCertificateHashes`: at most 14 days).
    pub fn generate_valid(
        not_before: time::OffsetDateTime,
        not_after: time::OffsetDateTime,
    ) -> Result<Self, TlsError> {
        let (certificate, key) = generate_pem(not_before, not_after)?;
        Self::from_pem(certificate.as_bytes(), key.as_bytes())
    }

    /// Its chain and key as rustls serves them.
    pub(crate) fn certified_key(&self) -> Result<rustls::sign::CertifiedKey, TlsError> {
        Ok(rustls::sign::CertifiedKey::from_der(
            self.chain.clone(),
            self.key.clone_key(),
            &super::provider(),
        )?)
    }

    /// The identity kept in `dir` ([`IDENTITY_FILE`]), made and written
    /// there (readable by its owner only) on first use, so that a server's
    /// fingerprint survives its restarts. Two processes starting at once
    /// agree on one: the file appears whole or not at all.
    pub fn load_or_create(dir: &Path) -> Result<Self, TlsError> {
        let path = dir.join(IDENTITY_FILE);
        let io = |err| TlsError::Io {
            path: path.clone(),
            err,
        };
        match std::fs::read(&path) {
            Ok(pem) => return Self::from_pem(&pem, &pem),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(io(err)),
        }
        std::fs::create_dir_all(dir).map_err(io)?;
        let (certificate, key) = generate_pem(TEN_YEARS.0, TEN_YEARS.1)?;
        let pem = format!("{key}{certificate}");
        // Written aside, then linked into place: a link fails if the file
        // is there, so a racing process's identity wins and is read back.
        let aside = dir.join(format!(
            ".{IDENTITY_FILE}.{}.{}",
            std::process::id(),
            rand_suffix()
        ));
        write_private(&aside, pem.as_bytes()).map_err(io)?;
        let linked = std::fs::hard_link(&aside, &path);
        let _ = std::fs::remove_file(&aside);
        match linked {
            Ok(()) => {
                tracing::info!(path = %path.display(), "made this server's TLS identity");
                Self::from_pem(pem.as_bytes(), pem.as_bytes())
            }
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                let pem = std::fs::read(&path).map_err(io)?;
                Self::from_pem(&pem, &pem)
            }
            Err(err) => Err(io(err)),
        }
    }

    /// The SHA-256 fingerprint of its certificate: what clients pin.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// Its certificate (DER), the one the fingerprint is of.
    pub fn certificate(&self) -> &[u8] {
        &self.chain[0]
    }

    /// The SHA-256 of its public key (the certificate's
    /// SubjectPublicKeyInfo), in base64: what Chromium's
    /// `--ignore-certificate-errors-spki-list` takes to trust this server's
    /// self-signed certificate, and only it.
    pub fn spki_sha256_base64(&self) -> Result<String, TlsError> {
        let key = rcgen::KeyPair::try_from(self.key.secret_der())
            .map_err(|err| TlsError::BadPem(format!("private key: {err}")))?;
        Ok(base64(&Sha256::digest(key.public_key_der())))
    }
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(DIGITS[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The default data directory of a server's identity and a client's known
/// hosts: `$SWITCHBOARD_DATA_DIR`, else `$XDG_DATA_HOME/switchboard`, else
/// `~/.local/share/switchboard`, else `.switchboard` in the working
/// directory.
pub fn default_data_dir() -> PathBuf {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("SWITCHBOARD_DATA_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = var("XDG_DATA_HOME") {
        return PathBuf::from(dir).join("switchboard");
    }
    match var("HOME") {
        Some(home) => PathBuf::from(home).join(".local/share/switchboard"),
        None => PathBuf::from(".switchboard"),
    }
}

/// A server's own long-lived certificate's dates (clients trust it by its
/// fingerprint, not its dates).
const TEN_YEARS: (time::OffsetDateTime, time::OffsetDateTime) = (
    time::macros::datetime!(2025-01-01 0:00 UTC),
    time::macros::datetime!(2035-01-01 0:00 UTC),
);

/// A key and its self-signed certificate, as PEM text (certificate, key).
fn generate_pem(
    not_before: time::OffsetDateTime,
    not_after: time::OffsetDateTime,
) -> Result<(String, String), TlsError> {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|err| TlsError::Generate(err.to_string()))?;
    let mut params = rcgen::CertificateParams::new(vec!["switchboard.invalid".to_string()])
        .map_err(|err| TlsError::Generate(err.to_string()))?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Switchboard server");
    params.not_before = not_before;
    params.not_after = not_after;
    let certificate = params
        .self_signed(&key)
        .map_err(|err| TlsError::Generate(err.to_string()))?;
    Ok((certificate.pem(), key.serialize_pem()))
}

/// Writes a new file readable and writable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// A few random hex digits, for a file name of one's own.
fn rand_suffix() -> String {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    Fingerprint::of(&bytes).to_string()[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_reads_back_in_any_of_its_forms() {
        let fingerprint = Fingerprint::of(b"certificate");
        let text = fingerprint.to_string();
        assert_eq!(text.len(), 64);
        let colons = fingerprint
            .0
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(":");
        for form in [text.clone(), format!("sha256:{text}"), colons] {
            assert_eq!(form.parse::<Fingerprint>().unwrap(), fingerprint, "{form}");
        }
        assert!("sha256:abc".parse::<Fingerprint>().is_err());
        assert!("zz".repeat(32).parse::<Fingerprint>().is_err());
    }

    #[test]
    fn an_identity_made_on_first_start_is_kept_private_and_survives_restarts() {
        let dir = std::env::temp_dir().join(format!("switchboard-identity-{}", rand_suffix()));
        let first = ServerIdentity::load_or_create(&dir).unwrap();
        let again = ServerIdentity::load_or_create(&dir).unwrap();
        assert_eq!(first.fingerprint(), again.fingerprint());
        assert_eq!(Fingerprint::of(again.certificate()), again.fingerprint());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join(IDENTITY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        }
        let other = ServerIdentity::generate().unwrap();
        assert_ne!(other.fingerprint(), first.fingerprint());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn base64_is_the_standard_one() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        let spki = ServerIdentity::generate()
            .unwrap()
            .spki_sha256_base64()
            .unwrap();
        assert_eq!(spki.len(), 44, "{spki}");
    }

    #[test]
    fn pem_without_a_certificate_is_refused_saying_so() {
        let err = ServerIdentity::from_pem(b"", b"").unwrap_err();
        assert!(err.to_string().contains("no certificate"), "{err}");
    }
}
