//! A fast hasher for ids a server hands out itself ([`PeerId`](super::PeerId),
//! a relay's player numbers): tables keyed by them are looked up several
//! times per message, and SipHash's defence against chosen keys buys
//! nothing when no peer chooses the key. Never use it for keys a peer sends
//! (names, zones): those keep the standard hasher.

use std::hash::{BuildHasherDefault, Hasher};

/// Multiplies the id by a large odd constant (Fibonacci hashing): one
/// instruction, and sequential ids spread over the table's buckets.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.write_u64(u64::from(*byte));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// What a `HashMap` or `HashSet` keyed by server-assigned ids takes.
pub type IdBuildHasher = BuildHasherDefault<IdHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    #[test]
    fn sequential_ids_hash_apart() {
        let build = IdBuildHasher::default();
        let hashes: HashSet<u64> = (0..100_000u64).map(|id| build.hash_one(id)).collect();
        assert_eq!(hashes.len(), 100_000);
        // The low bits a small table uses are spread too.
        let buckets: HashSet<u64> = (0..1024u64).map(|id| build.hash_one(id) & 1023).collect();
        assert!(buckets.len() > 600, "{} of 1024 buckets", buckets.len());
    }
}
