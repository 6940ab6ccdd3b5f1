//! Where the rules' randomness comes from: passed in, never read from the
//! OS here, so that a test or a replay gives the same ids and tokens every
//! run. A server passes the OS's random source (`switchboard::session::OsEntropy`);
//! reconnect tokens must be unpredictable, so nothing facing players may use
//! [`Seeded`].

/// A source of random bytes.
pub trait Entropy: Send {
    /// Fills `bytes` with random bytes.
    fn fill(&mut self, bytes: &mut [u8]);
}

/// A predictable source (splitmix64 from a seed): the same bytes every run,
/// for tests, the in-memory harness and replays. Never for a server facing
/// players: anyone who knows the seed knows every token.
#[derive(Debug, Clone)]
pub struct Seeded(u64);

impl Seeded {
    /// A source whose bytes follow from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
}

impl Entropy for Seeded {
    fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_bytes_every_run_and_seeds_differ() {
        let (mut a, mut b, mut c) = (Seeded::new(1), Seeded::new(1), Seeded::new(2));
        let (mut x, mut y, mut z) = ([0u8; 20], [0u8; 20], [0u8; 20]);
        a.fill(&mut x);
        b.fill(&mut y);
        c.fill(&mut z);
        assert_eq!(x, y);
        assert_ne!(x, z);
    }
}
