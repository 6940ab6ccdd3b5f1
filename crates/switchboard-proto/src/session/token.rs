//! The secret a client presents to get its id back.

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::entropy::Entropy;

/// 256 random bits from the operating system. Shown to nobody but the client
/// it was issued to; compared in constant time; replaced on every use.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconnectToken(pub [u8; 32]);

impl ReconnectToken {
    /// A fresh token from `entropy`.
    pub fn from_entropy(entropy: &mut dyn Entropy) -> Self {
        let mut bytes = [0u8; 32];
        entropy.fill(&mut bytes);
        Self(bytes)
    }

    /// A fresh token from the OS random source (feature `os-random`).
    #[cfg(feature = "os-random")]
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).expect("the OS random source failed");
        Self(bytes)
    }

    /// Whether `other` is this token, in time independent of where they differ.
    pub fn matches(&self, other: &ReconnectToken) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl std::fmt::Debug for ReconnectToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReconnectToken(<secret>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_compare_by_value() {
        let mut entropy = crate::entropy::Seeded::new(7);
        let a = ReconnectToken::from_entropy(&mut entropy);
        let b = ReconnectToken::from_entropy(&mut entropy);
        assert!(!a.matches(&b));
        assert!(a.matches(&a.clone()));
        let mut flipped = a.clone();
        flipped.0[31] ^= 1;
        assert!(!a.matches(&flipped));
    }

    #[test]
    fn debug_output_never_shows_the_secret() {
        let token = ReconnectToken([0xAB; 32]);
        assert!(!format!("{token:?}").contains("171"));
        assert!(!format!("{token:?}").to_lowercase().contains("ab"));
    }
}
