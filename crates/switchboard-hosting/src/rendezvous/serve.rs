//! The relay's connections: what each says it is in its first frame (a
//! player's join, a host's registration, a host's data connection), and
//! what is done with it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::frames::{Frame, MAX_FRAME_LEN, VERSION};
use futures::StreamExt;
use switchboard::socket::{
    accept_upgrade, forbid, Arrival, Listener, ListenerCaps, ListenerLimits, Upgrade, UpgradeRules,
};
use switchboard::tls::{Accepted, Secured, TlsServer, PLAINTEXT_REFUSED};
use switchboard_proto::connection::control;
use switchboard_proto::join_code::normalize_code;
use switchboard_proto::reason::CloseCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use super::games::{Game, Games};
use super::pipe::{self, frames};
use super::{RendezvousConfig, RendezvousStats};

/// What every connection task of one relay shares.
pub(super) struct RendezvousState {
    pub(super) config: RendezvousConfig,
    pub(super) stop: CancellationToken,
    games: Mutex<Games>,
    joined: AtomicU64,
    /// Shared with the listeners, which count the connections they close
    /// at accept.
    refused: Arc<AtomicU64>,
    pub(super) bytes: AtomicU64,
}

impl std::fmt::Debug for RendezvousState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RendezvousState").finish_non_exhaustive()
    }
}

impl RendezvousState {
    /// The caps every listener of the relay shares: `max_connections` of
    /// every kind, and `max_pending_per_address` not yet classified.
    pub(super) fn caps(&self) -> ListenerCaps {
        ListenerCaps::new(ListenerLimits {
            max_connections: self.config.max_connections,
            max_connections_per_address: usize::MAX,
            max_pending: usize::MAX,
            max_pending_per_address: self.config.max_pending_per_address,
        })
    }

    pub(super) fn new(config: RendezvousConfig, stop: CancellationToken) -> Self {
        Self {
            games: Mutex::new(Games::new(&config)),
            config,
            stop,
            joined: AtomicU64::new(0),
            refused: Arc::default(),
            bytes: AtomicU64::new(0),
        }
    }

    pub(super) fn games(&self) -> MutexGuard<'_, Games> {
        self.games.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn stats(&self) -> RendezvousStats {
        let games = self.games();
        RendezvousStats {
            codes: games.len(),
            players: games.players_now(),
            joined: self.joined.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            ..RendezvousStats::default()
        }
    }

    fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }
}

/// Accepts connections on `listener` until the relay stops: TCP ones say
/// what they are in their first frame; WebSocket ones are players whose
/// code is the request's path. `caps` are shared by both listeners; `tls`
/// is what the listener speaks to other machines.
pub(super) async fn accept(
    listener: TcpListener,
    shared: Arc<RendezvousState>,
    websocket: bool,
    caps: ListenerCaps,
    tls: Option<TlsServer>,
) {
    let name = if websocket {
        "join-code relay (WebSocket)"
    } else {
        "join-code relay"
    };
    let rules = Arc::new(UpgradeRules {
        max_request_head: shared.config.max_request_head,
        // Players' browsers join from any page: the relay holds no
        // session of theirs to take over.
        allowed_origins: None,
        max_message: shared.config.max_frame_len.saturating_add(5),
        pages: Vec::new(),
        webtransport: None,
    });
    Listener::with_caps(listener, name, caps, shared.stop.clone())
        .counting_refusals_in(shared.refused.clone())
        .serve(|arrival| {
            let (shared, rules, tls) = (shared.clone(), rules.clone(), tls.clone());
            async move {
                let stop = shared.stop.clone();
                let work = async {
                    if websocket {
                        websocket_player(arrival, &shared, &rules, tls.as_ref()).await;
                    } else {
                        first_frame(arrival, &shared, tls.as_ref()).await;
                    }
                };
                tokio::select! {
                    () = work => {}
                    () = stop.cancelled() => {}
                }
            }
        })
        .await;
}

/// How a connection came in: TLS where the listener speaks it (`tls`),
/// else plain, and whether it is plain from another machine (`afar`),
/// which the caller takes only for what needs no TLS of the relay's (a
/// native player's join: its own TLS with the host follows the code);
/// `Err` when the TLS handshake failed.
async fn secured(
    stream: tokio::net::TcpStream,
    addr: SocketAddr,
    tls: Option<&TlsServer>,
) -> std::io::Result<(Secured, bool)> {
    let Some(tls) = tls else {
        return Ok((Secured::Plain(stream), false));
    };
    Ok(match switchboard::tls::accept(stream, addr, tls).await? {
        Accepted::Tls(stream) => (Secured::Tls(stream), false),
        Accepted::Plain(stream) => (Secured::Plain(stream), false),
        Accepted::PlaintextRefused(stream) => (Secured::Plain(stream), true),
    })
}

/// Reads a TCP connection's first frame (exactly: what follows it is the
/// game's) and hands the connection to what it says it is. TLS first where
/// the port speaks it; a host's control connection from another machine
/// must be in TLS (its code's secret travels on it).
async fn first_frame(arrival: Arrival, shared: &Arc<RendezvousState>, tls: Option<&TlsServer>) {
    let (stream, addr, mut places) = arrival.into_parts();
    let read = async {
        let (mut stream, afar) = secured(stream, addr, tls).await.ok()?;
        let mut head = [0u8; 4];
        stream.read_exact(&mut head).await.ok()?;
        let len = u32::from_be_bytes(head) as usize;
        if len == 0 || len > MAX_FRAME_LEN + 1 {
            return Some(Err(len));
        }
        let mut body = vec![0u8; len];
        stream.read_exact(&mut body).await.ok()?;
        Some(Ok((stream, afar, body)))
    };
    let (mut stream, afar, body) =
        match tokio::time::timeout(shared.config.first_frame_timeout, read).await {
            Ok(Some(Ok(read))) => read,
            Ok(Some(Err(_))) | Ok(None) | Err(_) => {
                shared.refused();
                return;
            }
        };
    places.handshake_done();
    let frame = match body.split_first() {
        Some((0, payload)) => Frame::parse(payload),
        _ => Err(super::frames::BadFrame("flags set")),
    };
    match frame {
        Ok(Frame::Join { code }) => {
            let player = pipe::Player::Tcp(stream);
            join(player, addr, code, shared).await;
        }
        Ok(Frame::Host { .. }) if afar => {
            shared.refused();
            let reason = PLAINTEXT_REFUSED.to_string();
            let _ = stream.write_all(&Frame::Refuse { reason }.encode()).await;
            tracing::debug!(%addr, "a host's control connection in plaintext, refused");
        }
        Ok(Frame::Host { version, keep }) => host(stream, addr, version, keep, shared).await,
        Ok(Frame::Data { secret, ticket }) => {
            // The secret is checked before anything changes: a forged data
            // connection never touches a waiting player.
            let waiting = shared.games().answer(ticket, &secret);
            match waiting {
                Some(w) => {
                    let _ = w.answer.send(stream);
                }
                None => {
                    shared.refused();
                    tracing::debug!(%addr, ticket, "a data connection for no waiting player");
                }
            }
        }
        Ok(_) | Err(_) => {
            shared.refused();
            // A Switchboard client that forgot the code is told how to join.
            if body.get(1..5) == Some(&control::MAGIC[..]) {
                let why = "this is a join-code relay: join with CODE@host:port";
                let mut player = pipe::Player::Tcp(stream);
                pipe::refuse(&mut player, CloseCode::REFUSED, why).await;
            }
        }
    }
}

/// A WebSocket player: the code is the request's path (`/CODE`). In TLS
/// (`wss://`) where the port speaks it: a browser's frames are plain
/// inside, so plain from another machine is answered 403.
async fn websocket_player(
    arrival: Arrival,
    shared: &Arc<RendezvousState>,
    rules: &UpgradeRules,
    tls: Option<&TlsServer>,
) {
    let (stream, addr, mut places) = arrival.into_parts();
    let upgrade = async {
        let (mut stream, afar) = secured(stream, addr, tls).await?;
        if afar {
            forbid(&mut stream, PLAINTEXT_REFUSED).await?;
            return Err(std::io::Error::other("plaintext from another machine"));
        }
        accept_upgrade(stream, rules).await
    };
    let (ws, path) = match tokio::time::timeout(shared.config.first_frame_timeout, upgrade).await {
        Ok(Ok(Upgrade::WebSocket { ws, path })) => (ws, path),
        _ => {
            shared.refused();
            return;
        }
    };
    places.handshake_done();
    let path = path.split('?').next().unwrap_or_default();
    let code = path.trim_matches('/').to_string();
    join(pipe::Player::WebSocket(ws), addr, code, shared).await;
}

/// A player asks for the game of `code`: checked, announced to its host,
/// then piped to the data connection the host opens.
async fn join(
    mut player: pipe::Player,
    addr: SocketAddr,
    code: String,
    shared: &Arc<RendezvousState>,
) {
    let config = &shared.config;
    let (game, counted) = {
        let mut games = shared.games();
        let code = normalize_code(&code);
        let game = code.as_deref().and_then(|code| games.code(code));
        let may = games.may_guess(addr.ip(), game.is_none());
        let counted = games.count_player(shared, addr.ip(), config.max_players_per_address);
        (game.filter(|_| may).ok_or(may), counted)
    };
    let refusal = match (&game, &counted) {
        (Err(false), _) => Some((
            CloseCode::ABUSE,
            "too many wrong join codes (from your address, or at this relay): wait a minute"
                .to_string(),
        )),
        (Err(true), _) => Some((
            CloseCode::REFUSED,
            format!("no game has the join code {code:?}: it ended, or is mistyped"),
        )),
        (Ok(_), None) => Some((
            CloseCode::REFUSED,
            "too many players from your address at this relay".to_string(),
        )),
        (Ok(game), Some(_)) => {
            let players = game.players.load(Ordering::Relaxed);
            let max = config.max_players_per_code;
            (players >= max).then(|| {
                let why = format!("the game is full at the relay (at most {max} players a game)");
                (CloseCode::SERVER_FULL, why)
            })
        }
    };
    if let Some((close, why)) = refusal {
        shared.refused();
        pipe::refuse(&mut player, close, &why).await;
        return;
    }
    let (Ok(game), Some(_counted)) = (game, counted) else {
        return;
    };
    let Some(host) = host_stream(&game, &player, addr, shared).await else {
        shared.refused();
        let why = "the host did not answer through the relay: try again in a moment";
        pipe::refuse(&mut player, CloseCode::GOING_AWAY, why).await;
        return;
    };
    shared.joined.fetch_add(1, Ordering::Relaxed);
    game.players.fetch_add(1, Ordering::Relaxed);
    game.touch();
    tracing::debug!(code = %game.code, %addr, "player piped");
    pipe::run(player, host, &game, shared).await;
    game.players.fetch_sub(1, Ordering::Relaxed);
    game.touch();
}

/// Announces the player to the host and waits for its data connection.
async fn host_stream(
    game: &Arc<Game>,
    player: &pipe::Player,
    addr: SocketAddr,
    shared: &Arc<RendezvousState>,
) -> Option<Secured> {
    // A host between two control connections (its line dropped, it is
    // connecting again) is waited for, as long as it has to answer.
    let deadline = tokio::time::Instant::now() + shared.config.host_answer_timeout;
    let to_host = loop {
        if let Some(to_host) = game.to_host() {
            break to_host;
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let (answer, answered) = oneshot::channel();
    let ticket = shared.games().wait(game.clone(), answer).ok()?;
    let incoming = Frame::Incoming {
        ticket,
        websocket: matches!(player, pipe::Player::WebSocket(_)),
        addr: addr.to_string(),
    };
    if to_host.try_send(incoming).is_err() {
        shared.games().forget(ticket);
        return None;
    }
    let stream = tokio::time::timeout_at(deadline, answered).await;
    shared.games().forget(ticket);
    stream.ok()?.ok()
}

/// A host's control connection: its code (new, or kept after a
/// reconnect), then players announced and pings both ways until it ends.
async fn host(
    mut stream: Secured,
    addr: SocketAddr,
    version: u16,
    keep: Option<(String, super::frames::Secret)>,
    shared: &Arc<RendezvousState>,
) {
    let config = &shared.config;
    let game = if version != VERSION {
        Err(format!(
            "this relay speaks version {VERSION} of the join-code frames, not {version}"
        ))
    } else {
        let mut games = shared.games();
        let kept = keep.and_then(|(code, secret)| {
            games
                .code(&code)
                .filter(|g| g.is_secret(&secret) && !g.has_host())
        });
        match kept {
            Some(game) => Ok(game),
            None => games.register(addr, config),
        }
    };
    let game = match game {
        Ok(game) => game,
        Err(reason) => {
            shared.refused();
            let _ = stream.write_all(&Frame::Refuse { reason }.encode()).await;
            return;
        }
    };
    // Attached before the host hears its code: a player who joins the
    // moment the host shows it finds the host there.
    let (to_host, mut announced) = mpsc::channel(64);
    game.attach_host(to_host);
    let code = Frame::Code {
        code: game.code.clone(),
        secret: game.secret,
    };
    if stream.write_all(&code.encode()).await.is_err() {
        game.detach_host();
        return;
    }
    tracing::info!(code = %game.code, host = %addr, "host registered");
    let (read, mut write) = tokio::io::split(stream);
    let mut heard = FramedRead::new(read, frames(MAX_FRAME_LEN + 1));
    let mut ping = tokio::time::interval(config.keepalive);
    let mut last_heard = tokio::time::Instant::now();
    loop {
        let silence = last_heard + config.keepalive * 3;
        let frame = tokio::select! {
            frame = announced.recv() => frame,
            _ = ping.tick() => Some(Frame::Ping),
            heard = heard.next() => match heard {
                Some(Ok(bytes)) if bytes.len() > 5 && Frame::parse(&bytes[5..]) == Ok(Frame::Ping) => {
                    last_heard = tokio::time::Instant::now();
                    continue;
                }
                _ => break,
            },
            () = tokio::time::sleep_until(silence) => break,
        };
        let Some(frame) = frame else { break };
        let last = matches!(frame, Frame::Refuse { .. });
        if write.write_all(&frame.encode()).await.is_err() || last {
            break;
        }
    }
    game.detach_host();
    tracing::info!(code = %game.code, host = %addr, "host disconnected");
}
