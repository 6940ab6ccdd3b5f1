//! The join-code address: `CODE@host:port`, a game joined through the
//! join-code relay at `host:port` (`docs/HOSTING.md`). A master's listing
//! names a game by it and a player's dialer reads it; the relay's own
//! frames are `switchboard_hosting::rendezvous`'s.

/// The longest join code.
pub const MAX_CODE_LEN: usize = 16;

/// The letters of a join code: no 0/O, no 1/I, easy to read out loud.
pub const CODE_ALPHABET: &[u8; 32] = b"23456789ABCDEFGHJKLMNPQRSTUVWXYZ";

/// A join code as the relay keeps it: upper case, trimmed; `None` if it
/// cannot be a code (empty, too long, a letter not in the alphabet).
pub fn normalize_code(code: &str) -> Option<String> {
    let code = code.trim().to_ascii_uppercase();
    let fits = !code.is_empty() && code.len() <= MAX_CODE_LEN;
    (fits && code.bytes().all(|b| CODE_ALPHABET.contains(&b))).then_some(code)
}

/// `CODE@host:port`: a game joined through the relay at `host:port`.
/// `None` for any other address.
pub fn split_join_addr(addr: &str) -> Option<(&str, &str)> {
    let (code, relay) = addr.split_once('@')?;
    (normalize_code(code).is_some() && !relay.is_empty() && !addr.contains("://"))
        .then_some((code, relay))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_addresses_and_codes() {
        assert_eq!(
            split_join_addr("k7pq2m@relay.example:7400"),
            Some(("k7pq2m", "relay.example:7400"))
        );
        assert_eq!(split_join_addr("127.0.0.1:7000"), None);
        assert_eq!(split_join_addr("ws://x@y:1/"), None);
        assert_eq!(split_join_addr("K0@relay:1"), None); // 0 is not in the alphabet
        assert_eq!(normalize_code(" k7pq2m "), Some("K7PQ2M".into()));
        assert_eq!(normalize_code(&"A".repeat(17)), None);
    }
}
