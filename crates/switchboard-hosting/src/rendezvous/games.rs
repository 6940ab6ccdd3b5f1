//! The relay's hosted games: codes, secrets, players waiting for their
//! host, the per-address counts and the pace of each code's bytes.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::frames::{Frame, Secret, SECRET_LEN};
use switchboard::tls::Secured;
use switchboard_proto::join_code::CODE_ALPHABET;
use switchboard_proto::limits::{address_key, prefix_key, KeyedLimiter, RateLimit};
use tokio::sync::{mpsc, oneshot};

use super::serve::RendezvousState;

/// Letters in a code the relay gives: one of 32^8 (about 1.1 × 10^12).
/// With every one of `max_codes` (10,000) codes held, a guesser allowed
/// the relay-wide `wrong_codes_per_second` (50) needs 32^8 / (10,000 ×
/// 50) s ≈ 25 days on average to find any one of them: far longer than a
/// code lives (`idle_expiry`, 1 h without a player).
pub(super) const CODE_LEN: usize = 8;

/// One hosted game.
#[derive(Debug)]
pub(super) struct Game {
    pub(super) code: String,
    pub(super) secret: Secret,
    /// The address that registered it (codes per address count it).
    pub(super) host_ip: IpAddr,
    /// The host's control connection, while it is connected: where
    /// incoming players are announced.
    control: Mutex<Control>,
    pub(super) players: AtomicUsize,
    pace: Mutex<Pace>,
}

#[derive(Debug)]
struct Control {
    to_host: Option<mpsc::Sender<Frame>>,
    /// When the host last went, or a player last came or went.
    since: Instant,
}

impl Game {
    /// Whether `secret` is this game's (every byte compared, whatever the
    /// first wrong one).
    pub(super) fn is_secret(&self, secret: &Secret) -> bool {
        self.secret
            .iter()
            .zip(secret)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
    }

    /// The host's control connection, if it is connected.
    pub(super) fn to_host(&self) -> Option<mpsc::Sender<Frame>> {
        self.control.lock().expect("control lock").to_host.clone()
    }

    /// The host connected (again).
    pub(super) fn attach_host(&self, to_host: mpsc::Sender<Frame>) {
        let mut control = self.control.lock().expect("control lock");
        control.to_host = Some(to_host);
        control.since = Instant::now();
    }

    /// Whether a host is connected to it now.
    pub(super) fn has_host(&self) -> bool {
        self.control.lock().expect("control lock").to_host.is_some()
    }

    /// The host's control connection ended.
    pub(super) fn detach_host(&self) {
        let mut control = self.control.lock().expect("control lock");
        control.to_host = None;
        control.since = Instant::now();
    }

    /// A player came or went: the code is not idle.
    pub(super) fn touch(&self) {
        self.control.lock().expect("control lock").since = Instant::now();
    }

    /// Since when nothing happened to it (its host came or went, a player
    /// came or went).
    fn idle_since(&self) -> Instant {
        self.control.lock().expect("control lock").since
    }

    /// Why the code should go now, if it should.
    fn expired(&self, now: Instant, grace: Duration, idle: Duration) -> Option<&'static str> {
        let control = self.control.lock().expect("control lock");
        let quiet = now.saturating_duration_since(control.since);
        if control.to_host.is_none() && quiet >= grace {
            Some("its host is gone")
        } else if self.players.load(Ordering::Relaxed) == 0 && quiet >= idle {
            Some("no player joined for a long time")
        } else {
            None
        }
    }

    /// Charges `bytes` to the code's pace; how long to wait before piping
    /// more (zero while it is within its bytes a second).
    pub(super) fn charge(&self, bytes: usize, rate: u64) -> Duration {
        self.pace
            .lock()
            .expect("pace lock")
            .charge(bytes, rate, Instant::now())
    }
}

/// A token bucket of one second's bytes. A frame is always let through,
/// paid for after: the debt is what the next frame waits for.
#[derive(Debug)]
struct Pace {
    tokens: f64,
    at: Instant,
}

impl Pace {
    fn charge(&mut self, bytes: usize, rate: u64, now: Instant) -> Duration {
        let rate = rate.max(1) as f64;
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(rate) - bytes as f64;
        self.at = now;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / rate)
        }
    }
}

/// A player waiting for the host's data connection.
pub(super) struct Waiting {
    pub(super) game: Arc<Game>,
    pub(super) answer: oneshot::Sender<Secured>,
}

/// Every game, every waiting player, every per-address count.
pub(super) struct Games {
    by_code: HashMap<String, Arc<Game>>,
    /// Codes held per host address (an IPv6 /64 as one) and per prefix
    /// (an IPv4 /24, an IPv6 /48).
    codes_per_address: HashMap<IpAddr, usize>,
    codes_per_prefix: HashMap<IpAddr, usize>,
    /// Players waiting for their host, by a ticket of 64 random bits.
    waiting: HashMap<u64, Waiting>,
    /// Players piped, per address (connections not yet classified are
    /// the listener's: `max_pending_per_address`).
    players: HashMap<IpAddr, usize>,
    /// Wrong codes per address (`wrong_codes_per_minute`), bounded: the
    /// addresses whose budget refilled are forgotten first.
    wrong: KeyedLimiter<IpAddr>,
    /// Wrong codes from every address together (`wrong_codes_per_second`).
    wrong_total: KeyedLimiter<()>,
}

impl Games {
    pub(super) fn new(config: &super::RendezvousConfig) -> Self {
        let per_address = f64::from(config.wrong_codes_per_minute);
        Self {
            by_code: HashMap::new(),
            codes_per_address: HashMap::new(),
            codes_per_prefix: HashMap::new(),
            waiting: HashMap::new(),
            players: HashMap::new(),
            wrong: KeyedLimiter::with_max_keys(
                RateLimit {
                    per_second: per_address / 60.0,
                    burst: per_address.max(1.0),
                },
                config.max_guessing_addresses,
            ),
            wrong_total: KeyedLimiter::with_max_keys(
                RateLimit {
                    per_second: f64::from(config.wrong_codes_per_second),
                    burst: f64::from(config.wrong_codes_per_second).max(1.0),
                },
                1,
            ),
        }
    }
}

/// One more (or one fewer) in `counts` for `key`.
fn bump(counts: &mut HashMap<IpAddr, usize>, key: IpAddr, up: bool) {
    let n = counts.entry(key).or_default();
    if up {
        *n += 1;
    } else {
        *n = n.saturating_sub(1);
        if *n == 0 {
            counts.remove(&key);
        }
    }
}

/// A player counted for its address, given back when dropped.
pub(super) struct Counted {
    shared: Arc<RendezvousState>,
    ip: IpAddr,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut games = self.shared.games();
        let counts = &mut games.players;
        if let Some(n) = counts.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

impl Games {
    pub(super) fn code(&self, code: &str) -> Option<Arc<Game>> {
        self.by_code.get(code).cloned()
    }

    pub(super) fn len(&self) -> usize {
        self.by_code.len()
    }

    /// Players piped now, from every address.
    pub(super) fn players_now(&self) -> usize {
        self.players.values().sum()
    }

    /// Counts a player from `ip` if under `max`.
    pub(super) fn count_player(
        &mut self,
        shared: &Arc<RendezvousState>,
        ip: IpAddr,
        max: usize,
    ) -> Option<Counted> {
        let ip = address_key(ip);
        let n = self.players.entry(ip).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Counted {
            shared: shared.clone(),
            ip,
        })
    }

    /// Counts a wrong code from `ip` against its own budget and the
    /// relay's; `false` when either is spent (the join is then refused,
    /// the code unchecked).
    pub(super) fn may_guess(&mut self, ip: IpAddr, wrong: bool) -> bool {
        if !wrong {
            return true;
        }
        let now = Instant::now();
        self.wrong.allow(address_key(ip), now) && self.wrong_total.allow((), now)
    }

    /// A new game for a host at `host`, or why not. When every code is
    /// held, the one no player has used for the longest gives way, if that
    /// is longer than `config.min_idle_to_evict`: codes registered and
    /// never used cannot keep new hosts out.
    pub(super) fn register(
        &mut self,
        host: SocketAddr,
        config: &super::RendezvousConfig,
    ) -> Result<Arc<Game>, String> {
        let (ip, prefix) = (address_key(host.ip()), prefix_key(host.ip()));
        let held = self.codes_per_address.get(&ip).copied().unwrap_or(0);
        if held >= config.max_codes_per_address {
            return Err(format!(
                "your address holds {held} codes already, the most this relay gives one address"
            ));
        }
        let near = self.codes_per_prefix.get(&prefix).copied().unwrap_or(0);
        if near >= config.max_codes_per_prefix {
            return Err(format!(
                "your network holds {near} codes already, the most this relay gives one network"
            ));
        }
        if self.by_code.len() >= config.max_codes && !self.evict_idlest(config.min_idle_to_evict) {
            return Err(format!(
                "the relay holds its most codes ({}); try another relay",
                config.max_codes
            ));
        }
        let code = loop {
            let code = random_code()?;
            if !self.by_code.contains_key(&code) {
                break code;
            }
        };
        let mut secret = [0u8; SECRET_LEN];
        getrandom::fill(&mut secret).map_err(|e| format!("no randomness: {e}"))?;
        let game = Arc::new(Game {
            code: code.clone(),
            secret,
            host_ip: ip,
            control: Mutex::new(Control {
                to_host: None,
                since: Instant::now(),
            }),
            players: AtomicUsize::new(0),
            // Full: the first charge clamps it to one second's bytes.
            pace: Mutex::new(Pace {
                tokens: f64::INFINITY,
                at: Instant::now(),
            }),
        });
        self.by_code.insert(code, game.clone());
        bump(&mut self.codes_per_address, ip, true);
        bump(&mut self.codes_per_prefix, prefix, true);
        Ok(game)
    }

    /// Drops the code no player has used for the longest, if that is at
    /// least `min_idle` and it has no player now; whether one went.
    fn evict_idlest(&mut self, min_idle: Duration) -> bool {
        let now = Instant::now();
        let idlest = self
            .by_code
            .values()
            .filter(|g| g.players.load(Ordering::Relaxed) == 0)
            .map(|g| (g.idle_since(), g.code.clone()))
            .min();
        match idlest {
            Some((since, code)) if now.saturating_duration_since(since) >= min_idle => {
                tracing::info!(%code, "join code given up for a new host (the relay is full)");
                self.remove_code(&code, "the relay is full and no player used it");
                true
            }
            _ => false,
        }
    }

    /// Takes `code` off the relay; its host, if connected, is told why.
    fn remove_code(&mut self, code: &str, why: &str) {
        if let Some(game) = self.by_code.remove(code) {
            bump(&mut self.codes_per_address, game.host_ip, false);
            bump(&mut self.codes_per_prefix, prefix_key(game.host_ip), false);
            if let Some(to_host) = game.to_host() {
                let reason = format!("join code {code} expired: {why}");
                let _ = to_host.try_send(Frame::Refuse { reason });
            }
        }
    }

    /// A player of `game` waits for its host: its ticket, 64 random bits
    /// (another player's data connection cannot be aimed at it by
    /// counting).
    pub(super) fn wait(
        &mut self,
        game: Arc<Game>,
        answer: oneshot::Sender<Secured>,
    ) -> Result<u64, String> {
        let ticket = loop {
            let mut bytes = [0u8; 8];
            getrandom::fill(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
            let ticket = u64::from_le_bytes(bytes);
            if !self.waiting.contains_key(&ticket) {
                break ticket;
            }
        };
        self.waiting.insert(ticket, Waiting { game, answer });
        Ok(ticket)
    }

    /// The player of `ticket`, taken (once) when `secret` is its game's;
    /// a wrong secret leaves the waiting player untouched.
    pub(super) fn answer(&mut self, ticket: u64, secret: &Secret) -> Option<Waiting> {
        if !self.waiting.get(&ticket)?.game.is_secret(secret) {
            return None;
        }
        self.waiting.remove(&ticket)
    }

    /// Forgets the player of `ticket` (it stopped waiting).
    pub(super) fn forget(&mut self, ticket: u64) {
        self.waiting.remove(&ticket);
    }

    /// Removes codes whose host is gone past its grace, or idle too long;
    /// the hosts still connected are told why.
    fn expire(&mut self, grace: Duration, idle: Duration) {
        let now = Instant::now();
        let expired: Vec<(String, &'static str)> = self
            .by_code
            .iter()
            .filter_map(|(code, game)| Some((code.clone(), game.expired(now, grace, idle)?)))
            .collect();
        for (code, why) in expired {
            tracing::info!(%code, why, "join code expired");
            self.remove_code(&code, why);
        }
        self.waiting.retain(|_, w| !w.answer.is_closed());
        self.wrong.forget_idle(now, Duration::from_secs(120));
    }
}

/// A code of [`CODE_LEN`] letters of the alphabet, uniformly drawn.
fn random_code() -> Result<String, String> {
    let mut bytes = [0u8; CODE_LEN];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
    // 256 is a multiple of 32: every letter equally likely.
    Ok(bytes
        .iter()
        .map(|b| char::from(CODE_ALPHABET[usize::from(b % 32)]))
        .collect())
}

/// Expires codes once a second until the relay stops.
pub(super) async fn reap(shared: Arc<RendezvousState>) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = shared.stop.cancelled() => return,
        }
        let config = &shared.config;
        shared.games().expire(config.host_grace, config.idle_expiry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_lets_a_seconds_bytes_through_then_makes_the_next_wait() {
        let start = Instant::now();
        let mut pace = Pace {
            tokens: 1000.0,
            at: start,
        };
        assert_eq!(pace.charge(600, 1000, start), Duration::ZERO);
        assert_eq!(pace.charge(900, 1000, start), Duration::from_millis(500));
        // Half a second later the debt is paid.
        let later = start + Duration::from_millis(500);
        assert_eq!(pace.charge(0, 1000, later), Duration::ZERO);
    }

    #[test]
    fn codes_are_six_letters_of_the_alphabet() {
        let code = random_code().unwrap();
        assert_eq!(code.len(), CODE_LEN);
        assert!(switchboard_proto::join_code::normalize_code(&code).as_deref() == Some(&*code));
    }
}
