//! Tickets one process of a service issues and another honours: a few
//! bytes signed (HMAC-SHA256) with a key every process of the service
//! shares, so the second process needs no round trip to believe the first
//! (a matchmaker's seat reservation, a relay's zone handover).

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The signature of `bytes` under `key`.
pub fn sign(key: &[u8; 32], bytes: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(bytes);
    mac.finalize().into_bytes().into()
}

/// Whether `signature` is `bytes`'s under `key`, compared in constant time.
pub fn verify(key: &[u8; 32], bytes: &[u8], signature: &[u8; 32]) -> bool {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(bytes);
    mac.verify_slice(signature).is_ok()
}

/// Now, in ms since the Unix epoch: a ticket's expiry, which another
/// process (another machine's clock) checks.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Sixteen random bytes: a ticket's number, so that each is honoured once.
pub fn nonce() -> [u8; 16] {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).expect("the OS random source failed");
    nonce
}

/// A connect token's nonce ([`crate::token`]): random, never used twice
/// with a key.
pub fn token_nonce() -> [u8; crate::token::NONCE_LEN] {
    let mut nonce = [0u8; crate::token::NONCE_LEN];
    getrandom::fill(&mut nonce).expect("the OS random source failed");
    nonce
}

/// Now, in Unix seconds: a connect token's expiry.
pub fn unix_secs() -> u64 {
    unix_ms() / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_holds_for_its_key_and_bytes_only() {
        let key = [7u8; 32];
        let signature = sign(&key, b"seat 5 on process 3");
        assert!(verify(&key, b"seat 5 on process 3", &signature));
        assert!(!verify(&key, b"seat 6 on process 3", &signature));
        assert!(!verify(&[8u8; 32], b"seat 5 on process 3", &signature));
        let mut flipped = signature;
        flipped[0] ^= 1;
        assert!(!verify(&key, b"seat 5 on process 3", &flipped));
        assert_ne!(nonce(), nonce());
    }
}
