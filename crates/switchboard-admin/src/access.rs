//! Who may read and who may control: the token (compared in constant
//! time), guesses slowed down per address, and the `Host` a request names
//! (a web page that rebinds its own name to 127.0.0.1 must not read the
//! players' addresses off a loopback admin port).

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use subtle::ConstantTimeEq;
use switchboard::session::{Backoff, BackoffPolicy};
use switchboard::socket::address_key;

/// The shortest token an admin server accepts (characters).
pub const MIN_TOKEN_CHARS: usize = 16;

/// What a handler knows of who asks: the request's headers and the peer.
pub(crate) struct Caller {
    headers: HeaderMap,
    peer: Option<IpAddr>,
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|info| address_key(info.0.ip()));
        Ok(Caller {
            headers: parts.headers.clone(),
            peer,
        })
    }
}

/// What a request may do.
pub(crate) enum Access {
    Granted,
    Refused(Response),
}

/// The rules, from the config.
pub(crate) struct Guard {
    token: Option<String>,
    /// Reads need no token (bound to loopback).
    open_reads: bool,
    allowed_hosts: Vec<String>,
    /// Wrong tokens per address: past `free_guesses`, each one doubles the
    /// address's wait.
    guesses: Mutex<Guesses>,
}

struct Guesses {
    backoff: Backoff,
    free: u32,
    /// Wrong tokens per address that cost nothing yet.
    spent: std::collections::HashMap<IpAddr, u32>,
}

impl Guard {
    pub(crate) fn new(
        token: Option<String>,
        open_reads: bool,
        allowed_hosts: Vec<String>,
        free_guesses: u32,
        backoff: BackoffPolicy,
    ) -> Self {
        Self {
            token,
            open_reads,
            allowed_hosts,
            guesses: Mutex::new(Guesses {
                backoff: Backoff::new(backoff),
                free: free_guesses,
                spent: Default::default(),
            }),
        }
    }

    /// A read (overview, clients, log, metrics).
    pub(crate) fn read(&self, caller: &Caller) -> Access {
        if let Some(refused) = self.wrong_host(caller) {
            return Access::Refused(refused);
        }
        if self.open_reads {
            return Access::Granted;
        }
        self.with_token(caller, "a token is needed")
    }

    /// A control (kick, notice, bots).
    pub(crate) fn control(&self, caller: &Caller) -> Access {
        if let Some(refused) = self.wrong_host(caller) {
            return Access::Refused(refused);
        }
        if self.token.is_none() {
            let why = "no admin token is configured: controls are off";
            return Access::Refused(refuse(StatusCode::FORBIDDEN, why));
        }
        self.with_token(caller, "a valid token is needed")
    }

    /// Checks the caller's token, unless its address must wait after
    /// wrong ones (then it is not even compared).
    fn with_token(&self, caller: &Caller, why: &str) -> Access {
        let Some(token) = &self.token else {
            return Access::Refused(refuse(StatusCode::UNAUTHORIZED, why));
        };
        let now = Instant::now();
        let mut guesses = self.guesses.lock().expect("guesses lock");
        if let Some(peer) = caller.peer {
            let wait = guesses.backoff.wait(peer, now);
            if wait > Duration::ZERO {
                let why = format!(
                    "too many wrong tokens; retry in {} s",
                    wait.as_secs().max(1)
                );
                return Access::Refused(refuse(StatusCode::TOO_MANY_REQUESTS, &why));
            }
        }
        let given = caller
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let Some(given) = given else {
            // No token at all is not a guess.
            return Access::Refused(refuse(StatusCode::UNAUTHORIZED, why));
        };
        let right = bool::from(given.as_bytes().ct_eq(token.as_bytes()));
        if let Some(peer) = caller.peer {
            guesses.count(peer, right, now);
        }
        if right {
            Access::Granted
        } else {
            Access::Refused(refuse(StatusCode::UNAUTHORIZED, why))
        }
    }

    /// A `Host` that is neither an IP address, `localhost`, nor one of
    /// `allowed_hosts`: a browser that was sent here under another name.
    fn wrong_host(&self, caller: &Caller) -> Option<Response> {
        let host = caller.headers.get(header::HOST)?.to_str().unwrap_or("");
        if host_allowed(host, &self.allowed_hosts) {
            return None;
        }
        let why = "this Host is not allowed (AdminConfig::allowed_hosts)";
        Some(refuse(StatusCode::MISDIRECTED_REQUEST, why))
    }
}

impl Guesses {
    fn count(&mut self, peer: IpAddr, right: bool, now: Instant) {
        if right {
            self.spent.remove(&peer);
            self.backoff.succeeded(peer);
            return;
        }
        self.backoff.forget_old(now);
        let spent = self.spent.entry(peer).or_default();
        *spent += 1;
        if *spent > self.free {
            self.backoff.failed(peer, now);
        }
        // Bounded like the backoff's table: the oldest counts go first.
        if self.spent.len() > 4096 {
            self.spent.clear();
        }
    }
}

/// Whether `host` (a `Host` header: a name or address, maybe a port) names
/// this server the way an operator would: an IP address, `localhost`, or a
/// name in `allowed`.
pub(crate) fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = match host.strip_prefix('[') {
        // [v6]:port
        Some(rest) => {
            return rest
                .split(']')
                .next()
                .is_some_and(|v6| v6.parse::<IpAddr>().is_ok())
        }
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.parse::<IpAddr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}

pub(crate) fn refuse(status: StatusCode, why: &str) -> Response {
    (status, Json(json!({ "error": why }))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_an_operator_uses_pass_and_rebound_names_do_not() {
        let allowed = vec!["admin.example.org".to_string()];
        for host in [
            "127.0.0.1:7280",
            "127.0.0.1",
            "[::1]:7280",
            "localhost:7280",
            "10.0.0.5",
            "Admin.Example.org:443",
        ] {
            assert!(host_allowed(host, &allowed), "{host}");
        }
        for host in ["evil.example:7280", "attacker.rebind.network", "[evil]:1"] {
            assert!(!host_allowed(host, &allowed), "{host}");
        }
    }
}
