//! The relay's hosted games: codes, secrets, players waiting for their
//! host, the per-address counts and the pace of each code's bytes.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchboard_proto::rendezvous::{Frame, Secret, CODE_ALPHABET, SECRET_LEN};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use super::serve::Shared;

/// Letters in a code the relay gives.
const CODE_LEN: usize = 6;

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
    pub(super) answer: oneshot::Sender<TcpStream>,
}

/// Every game, every waiting player, every per-address count.
#[derive(Default)]
pub(super) struct Games {
    by_code: HashMap<String, Arc<Game>>,
    waiting: HashMap<u64, Waiting>,
    next_ticket: u64,
    /// Connections not yet classified, players piped, per address.
    pending: HashMap<IpAddr, usize>,
    players: HashMap<IpAddr, usize>,
    /// Wrong codes per address in the current minute.
    wrong: HashMap<IpAddr, (Instant, u32)>,
}

/// A count per address, given back when dropped.
pub(super) struct Counted {
    shared: Arc<Shared>,
    ip: IpAddr,
    pending: bool,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut games = self.shared.games();
        let counts = if self.pending {
            &mut games.pending
        } else {
            &mut games.players
        };
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

    /// Takes a count of `ip` (pending or player) if under `max`.
    pub(super) fn count(
        &mut self,
        shared: &Arc<Shared>,
        ip: IpAddr,
        pending: bool,
        max: usize,
    ) -> Option<Counted> {
        let counts = if pending {
            &mut self.pending
        } else {
            &mut self.players
        };
        let n = counts.entry(ip).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Counted {
            shared: shared.clone(),
            ip,
            pending,
        })
    }

    /// Counts a wrong code from `ip`; `false` when it has had its share
    /// this minute (and is then refused without a lookup).
    pub(super) fn may_guess(&mut self, ip: IpAddr, per_minute: u32, wrong: bool) -> bool {
        let now = Instant::now();
        let (start, n) = self.wrong.entry(ip).or_insert((now, 0));
        if now.saturating_duration_since(*start) >= Duration::from_secs(60) {
            (*start, *n) = (now, 0);
        }
        if wrong {
            *n += 1;
        }
        *n <= per_minute
    }

    /// A new game for a host at `host`, or why not.
    pub(super) fn register(
        &mut self,
        host: SocketAddr,
        max_codes: usize,
        max_per_address: usize,
    ) -> Result<Arc<Game>, String> {
        if self.by_code.len() >= max_codes {
            return Err(format!(
                "the relay holds its most codes ({max_codes}); try another relay"
            ));
        }
        let held = self
            .by_code
            .values()
            .filter(|g| g.host_ip == host.ip())
            .count();
        if held >= max_per_address {
            return Err(format!(
                "your address holds {held} codes already, the most this relay gives one address"
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
            host_ip: host.ip(),
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
        Ok(game)
    }

    /// A player of `game` waits for its host: its ticket.
    pub(super) fn wait(&mut self, game: Arc<Game>, answer: oneshot::Sender<TcpStream>) -> u64 {
        self.next_ticket += 1;
        let ticket = self.next_ticket;
        self.waiting.insert(ticket, Waiting { game, answer });
        ticket
    }

    /// The player of `ticket`, taken (once).
    pub(super) fn answer(&mut self, ticket: u64) -> Option<Waiting> {
        self.waiting.remove(&ticket)
    }

    /// Removes codes whose host is gone past its grace, or idle too long;
    /// the hosts still connected are told why.
    fn expire(&mut self, grace: Duration, idle: Duration) {
        let now = Instant::now();
        self.by_code
            .retain(|code, game| match game.expired(now, grace, idle) {
                Some(why) => {
                    tracing::info!(%code, why, "join code expired");
                    if let Some(to_host) = game.to_host() {
                        let reason = format!("join code {code} expired: {why}");
                        let _ = to_host.try_send(Frame::Refuse { reason });
                    }
                    false
                }
                None => true,
            });
        self.waiting.retain(|_, w| !w.answer.is_closed());
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
pub(super) async fn reap(shared: Arc<Shared>) {
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
        assert!(switchboard_proto::rendezvous::normalize_code(&code).as_deref() == Some(&*code));
    }
}
