//! Connect tokens, for fleets of servers: a backend (the game's web
//! service, or a matchmaker) mints a token naming the player, the servers
//! it may join, an expiry and up to [`MAX_USER_DATA`] bytes of its own,
//! sealed with XChaCha20-Poly1305 under a key the servers share; a server
//! that requires tokens admits a new player only with a valid, unexpired
//! token naming it, each token once ([`TokenGate`]). The flow of netcode's
//! connect tokens (renet, lightyear) and Nakama's session tokens.
//!
//! No IO here: the nonce and the time are passed in.
//!
//! ```text
//!  offset  bytes  what
//!  0       1      version (1)
//!  1       24     nonce: random, unique per token (the replay cache's key)
//!  25      n+16   the sealed body and its Poly1305 tag; associated data
//!                 "SWCT" and the version byte
//!  body:
//!  0       8      client id (u64, big-endian): the backend's id of the player
//!  8       8      expires at (u64, big-endian): Unix seconds
//!  16      1      servers, 1..=8, each: length (u8, 1..=64) and its name
//!                 (UTF-8, as the server names itself: "host:port")
//!  ..      2      user data length (u16, big-endian, 0..=256), then the data
//! ```

use std::collections::HashMap;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

/// The layout's version byte.
pub const VERSION: u8 = 1;
/// Bytes of the nonce.
pub const NONCE_LEN: usize = 24;
/// Bytes of user data a token may carry.
pub const MAX_USER_DATA: usize = 256;
/// Servers a token may name.
pub const MAX_SERVERS: usize = 8;
/// Bytes of one server's name.
pub const MAX_SERVER_NAME: usize = 64;
/// The longest sealed token: version, nonce, the largest body, the tag.
pub const MAX_TOKEN_LEN: usize =
    1 + NONCE_LEN + 8 + 8 + 1 + MAX_SERVERS * (1 + MAX_SERVER_NAME) + 2 + MAX_USER_DATA + 16;
/// The associated data every token is sealed with.
const AAD: &[u8; 4] = b"SWCT";

/// The key the backend and the servers share (32 bytes). Its `Debug`
/// shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenKey(pub [u8; 32]);

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

/// What a connect token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectToken {
    /// The backend's id of the player.
    pub client_id: u64,
    /// The servers it may join, as each names itself ("host:port").
    pub servers: Vec<String>,
    /// When it stops being good, in Unix seconds.
    pub expires_at: u64,
    /// The backend's bytes for the game (a player's rank, a match id).
    pub user_data: Vec<u8>,
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Not a token of this layout (too short or long, another version).
    #[error("not a connect token")]
    Malformed,
    /// Its seal does not open: altered, or sealed with another key.
    #[error("forged or altered")]
    Forged,
    /// Past its expiry.
    #[error("expired")]
    Expired,
    /// It names other servers than this one.
    #[error("for another server")]
    OtherServer,
    /// It was used before.
    #[error("used before")]
    Replayed,
    /// The replay cache holds its most live tokens: try again shortly.
    #[error("too many joins at once")]
    Busy,
    /// What was to be sealed breaks a bound (too many servers, a name or
    /// the user data too long).
    #[error("cannot be sealed: {0}")]
    TooBig(&'static str),
}

impl ConnectToken {
    /// Seals it under `key` with `nonce` (random, never used twice with the
    /// key: the caller's entropy).
    pub fn seal(&self, key: &TokenKey, nonce: [u8; NONCE_LEN]) -> Result<Vec<u8>, TokenError> {
        if self.servers.is_empty() || self.servers.len() > MAX_SERVERS {
            return Err(TokenError::TooBig("1 to 8 servers"));
        }
        if self.user_data.len() > MAX_USER_DATA {
            return Err(TokenError::TooBig("at most 256 bytes of user data"));
        }
        let mut body = Vec::with_capacity(MAX_TOKEN_LEN);
        body.extend_from_slice(&self.client_id.to_be_bytes());
        body.extend_from_slice(&self.expires_at.to_be_bytes());
        body.push(self.servers.len() as u8);
        for server in &self.servers {
            if server.is_empty() || server.len() > MAX_SERVER_NAME {
                return Err(TokenError::TooBig("server names of 1 to 64 bytes"));
            }
            body.push(server.len() as u8);
            body.extend_from_slice(server.as_bytes());
        }
        body.extend_from_slice(&(self.user_data.len() as u16).to_be_bytes());
        body.extend_from_slice(&self.user_data);
        let sealed = cipher(key)
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &body,
                    aad: &associated(),
                },
            )
            .map_err(|_| TokenError::TooBig("the cipher refused it"))?;
        let mut token = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        token.push(VERSION);
        token.extend_from_slice(&nonce);
        token.extend_from_slice(&sealed);
        Ok(token)
    }

    /// Opens `token` under `key`: what it says, and its nonce.
    pub fn open(token: &[u8], key: &TokenKey) -> Result<(Self, [u8; NONCE_LEN]), TokenError> {
        if token.len() < 1 + NONCE_LEN + 16 || token.len() > MAX_TOKEN_LEN || token[0] != VERSION {
            return Err(TokenError::Malformed);
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&token[1..1 + NONCE_LEN]);
        let body = cipher(key)
            .decrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &token[1 + NONCE_LEN..],
                    aad: &associated(),
                },
            )
            .map_err(|_| TokenError::Forged)?;
        Ok((parse(&body).ok_or(TokenError::Malformed)?, nonce))
    }
}

fn cipher(key: &TokenKey) -> XChaCha20Poly1305 {
    XChaCha20Poly1305::new((&key.0).into())
}

fn associated() -> [u8; 5] {
    [AAD[0], AAD[1], AAD[2], AAD[3], VERSION]
}

/// The body's fields (a sealed body is ours, but read with care all the
/// same: a leaked key must not make a server panic).
fn parse(body: &[u8]) -> Option<ConnectToken> {
    let mut at = 0usize;
    let mut take = |n: usize| {
        let part = body.get(at..at + n)?;
        at += n;
        Some(part)
    };
    let client_id = u64::from_be_bytes(take(8)?.try_into().ok()?);
    let expires_at = u64::from_be_bytes(take(8)?.try_into().ok()?);
    let count = take(1)?[0] as usize;
    if count == 0 || count > MAX_SERVERS {
        return None;
    }
    let mut servers = Vec::with_capacity(count);
    for _ in 0..count {
        let len = take(1)?[0] as usize;
        servers.push(String::from_utf8(take(len)?.to_vec()).ok()?);
    }
    let len = u16::from_be_bytes(take(2)?.try_into().ok()?) as usize;
    if len > MAX_USER_DATA {
        return None;
    }
    let user_data = take(len)?.to_vec();
    (at == body.len()).then_some(ConnectToken {
        client_id,
        servers,
        expires_at,
        user_data,
    })
}

/// What a server requires of its new players: a connect token sealed
/// under `key` naming one of `servers`; a server's config field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRules {
    /// The key the backend seals with.
    pub key: TokenKey,
    /// The names this server answers to ("host:port", as the backend
    /// writes them into tokens).
    pub servers: Vec<String>,
    /// Live tokens remembered against replay (default 65,536, about 2.5 MB
    /// at most); past it new players are refused as busy until some expire.
    pub max_remembered: usize,
}

impl TokenRules {
    /// Tokens under `key` naming one of `servers`, the default memory.
    pub fn new(key: TokenKey, servers: Vec<String>) -> Self {
        Self {
            key,
            servers,
            max_remembered: 65_536,
        }
    }

    /// The gate that checks by these rules.
    pub fn gate(&self) -> TokenGate {
        TokenGate::new(self.key.clone(), self.servers.clone(), self.max_remembered)
    }
}

/// A server's check of the tokens its new players bring: its key, the
/// names it answers to, and the tokens seen (each admitted once), bounded.
#[derive(Debug)]
pub struct TokenGate {
    key: TokenKey,
    names: Vec<String>,
    /// Nonces of tokens admitted, with their expiry: forgotten once
    /// expired (a token past its expiry is refused anyway).
    seen: HashMap<[u8; NONCE_LEN], u64>,
    max_seen: usize,
}

impl TokenGate {
    /// Checks tokens sealed under `key` that name one of `names`,
    /// remembering at most `max_seen` live ones (past it a join is refused
    /// as [`TokenError::Busy`] until some expire).
    pub fn new(key: TokenKey, names: Vec<String>, max_seen: usize) -> Self {
        Self {
            key,
            names,
            seen: HashMap::new(),
            max_seen,
        }
    }

    /// Admits `token` at `now` (Unix seconds), once: what it says, or why
    /// not. Nothing is remembered of a refused token.
    pub fn admit(&mut self, token: &[u8], now: u64) -> Result<ConnectToken, TokenError> {
        let (opened, nonce) = self.check(token, now)?;
        self.remember(nonce, opened.expires_at, now);
        Ok(opened)
    }

    /// Checks `token` at `now` as [`admit`](Self::admit) does, remembering
    /// nothing: what it says and its nonce, or why not. For a request that
    /// is validated before anything changes; [`remember`](Self::remember)
    /// takes the token once the change is made.
    pub fn check(
        &self,
        token: &[u8],
        now: u64,
    ) -> Result<(ConnectToken, [u8; NONCE_LEN]), TokenError> {
        let (opened, nonce) = ConnectToken::open(token, &self.key)?;
        if opened.expires_at <= now {
            return Err(TokenError::Expired);
        }
        if !opened.servers.iter().any(|s| self.names.contains(s)) {
            return Err(TokenError::OtherServer);
        }
        if self.seen.contains_key(&nonce) {
            return Err(TokenError::Replayed);
        }
        // Full only if the live ones fill it (expired ones are forgotten
        // when the next is remembered).
        let full = self.seen.len() >= self.max_seen
            && self.seen.values().filter(|expires| **expires > now).count() >= self.max_seen;
        if full {
            return Err(TokenError::Busy);
        }
        Ok((opened, nonce))
    }

    /// Remembers the token of `nonce`, good until `expires_at`, as used (a
    /// token [`check`](Self::check) passed at `now`); the expired ones are
    /// forgotten when it is full.
    pub fn remember(&mut self, nonce: [u8; NONCE_LEN], expires_at: u64, now: u64) {
        if self.seen.len() >= self.max_seen {
            self.seen.retain(|_, expires| *expires > now);
        }
        self.seen.insert(nonce, expires_at);
    }

    /// Tokens remembered now.
    pub fn remembered(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(servers: &[&str], expires_at: u64) -> ConnectToken {
        ConnectToken {
            client_id: 42,
            servers: servers.iter().map(|s| s.to_string()).collect(),
            expires_at,
            user_data: b"rank=gold".to_vec(),
        }
    }

    const KEY: TokenKey = TokenKey([7; 32]);

    /// docs/PROTOCOL.md's vector: client 42, "game.example:7000", expiring
    /// at 1,000, user data "rank=gold".
    const VECTOR: &str = "0101010101010101010101010101010101010101010101010\
        1b174034dc9ecedb53deb9783270b5465b656f544c91125cac97ed2450c8c43784fde7f7485ff2c2f19fc\
        0dbaf0ea5f82e9ae1a3b2f1a172403e8e9dcb275";

    #[test]
    fn a_token_seals_and_opens_to_what_it_said_byte_for_byte_as_documented() {
        let minted = token(&["game.example:7000"], 1_000);
        let sealed = minted.seal(&KEY, [1; NONCE_LEN]).unwrap();
        // version, nonce, body (8 + 8 + 1 + 1 + 17 + 2 + 9 = 46), tag.
        assert_eq!(sealed.len(), 1 + 24 + 46 + 16);
        assert_eq!(sealed[0], VERSION);
        assert_eq!(&sealed[1..25], &[1; 24]);
        assert_eq!(
            ConnectToken::open(&sealed, &KEY).unwrap(),
            (minted, [1; 24])
        );
        // The same inputs, the same bytes: the vector of docs/PROTOCOL.md
        // (key 32 bytes of 7, nonce 24 bytes of 1), for other languages.
        let hex: String = sealed.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, VECTOR);
    }

    #[test]
    fn a_replayed_expired_tampered_or_other_server_token_is_refused() {
        let mut gate = TokenGate::new(KEY, vec!["a:1".into()], 16);
        let good = token(&["a:1", "b:2"], 100).seal(&KEY, [2; 24]).unwrap();
        assert_eq!(gate.admit(&good, 50).unwrap().user_data, b"rank=gold");
        assert_eq!(gate.admit(&good, 51), Err(TokenError::Replayed));
        let late = token(&["a:1"], 100).seal(&KEY, [3; 24]).unwrap();
        assert_eq!(gate.admit(&late, 100), Err(TokenError::Expired));
        let elsewhere = token(&["b:2"], 100).seal(&KEY, [4; 24]).unwrap();
        assert_eq!(gate.admit(&elsewhere, 50), Err(TokenError::OtherServer));
        let mut tampered = token(&["a:1"], 100).seal(&KEY, [5; 24]).unwrap();
        let last = tampered.len() - 20;
        tampered[last] ^= 1;
        assert_eq!(gate.admit(&tampered, 50), Err(TokenError::Forged));
        let other_key = token(&["a:1"], 100)
            .seal(&TokenKey([8; 32]), [6; 24])
            .unwrap();
        assert_eq!(gate.admit(&other_key, 50), Err(TokenError::Forged));
        assert_eq!(gate.admit(b"", 50), Err(TokenError::Malformed));
        assert_eq!(gate.remembered(), 1, "nothing kept of the refused");
    }

    #[test]
    fn the_replay_cache_is_bounded_and_forgets_expired_tokens() {
        let mut gate = TokenGate::new(KEY, vec!["a:1".into()], 2);
        for n in 0..2u8 {
            let sealed = token(&["a:1"], 10).seal(&KEY, [n; 24]).unwrap();
            gate.admit(&sealed, 5).unwrap();
        }
        let third = token(&["a:1"], 100).seal(&KEY, [9; 24]).unwrap();
        assert_eq!(gate.admit(&third, 5), Err(TokenError::Busy));
        // Once the first two expired they are forgotten: room again.
        assert!(gate.admit(&third, 10).is_ok());
        assert_eq!(gate.remembered(), 1);
    }

    #[test]
    fn a_check_takes_nothing_and_a_remembered_token_is_refused_after() {
        let mut gate = TokenGate::new(KEY, vec!["a:1".into()], 2);
        let sealed = token(&["a:1"], 10).seal(&KEY, [3; 24]).unwrap();
        let (opened, nonce) = gate.check(&sealed, 5).unwrap();
        assert!(gate.check(&sealed, 5).is_ok(), "checked twice, still good");
        assert_eq!(gate.remembered(), 0);
        gate.remember(nonce, opened.expires_at, 5);
        assert_eq!(gate.check(&sealed, 5), Err(TokenError::Replayed));
        assert_eq!(gate.admit(&sealed, 5), Err(TokenError::Replayed));
    }

    #[test]
    fn bounds_are_checked_when_sealing() {
        let mut big = token(&["a:1"], 1);
        big.user_data = vec![0; MAX_USER_DATA + 1];
        assert!(big.seal(&KEY, [0; 24]).is_err());
        let many = token(&["a:1"; 9], 1);
        assert!(many.seal(&KEY, [0; 24]).is_err());
        let largest = ConnectToken {
            servers: vec!["x".repeat(MAX_SERVER_NAME); MAX_SERVERS],
            user_data: vec![0; MAX_USER_DATA],
            ..token(&[], 1)
        };
        assert_eq!(largest.seal(&KEY, [0; 24]).unwrap().len(), MAX_TOKEN_LEN);
    }
}
