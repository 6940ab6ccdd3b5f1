//! The player's side: the connection (following a named game through its
//! directory, told the truth when it comes back, its state in words in
//! `client/link.rs`), a terminal interface (a map and typed orders), and
//! the scripted bot player (`client/bot.rs`).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use switchboard::process::LocalServer;
use switchboard::{ClientConfig, ClientEvent, NetworkClient, RequestStatus, RequestTicket};

mod bot;
mod link;
mod typed;

pub(crate) use link::{Link, Tone};
pub(crate) use typed::lobby_players;
pub use typed::{render, render_lobby};

use crate::directory::Directory;
use crate::protocol::{printable, GameAct, LobbyAct, LobbyView, Msg, NationView};
use crate::rejoin::Rejoin;

/// What the client has heard.
#[derive(Default)]
pub(crate) struct Seen {
    pub(crate) view: Option<NationView>,
    pub(crate) lobby: Option<LobbyView>,
    pub(crate) events: Vec<String>,
    pub(crate) fresh_view: bool,
    pub(crate) fresh_lobby: bool,
    /// Views and lobbies heard so far.
    pub(crate) views: u64,
    pub(crate) lobbies: u64,
}

/// How many times a player tries to come back after a lost connection
/// (quick at first, then every half second: about a minute).
const RECONNECT_ATTEMPTS: u32 = 120;

/// A connected player. It pulls its client's events (no slots, no shared
/// cells): what it has heard is plain state of its own.
pub(crate) struct Player<'a> {
    pub(crate) name: String,
    pub(crate) client: NetworkClient,
    pub(crate) seen: Seen,
    /// Where the connection stands (the status line).
    pub(crate) link: Link,
    /// Where others join this game, when the player hosts it.
    pub(crate) invite: Option<String>,
    /// Where players on the internet join a hosted game (the router's
    /// port mapping, the join-code relay), the latest news: the lobby
    /// shows it.
    pub(crate) internet: Vec<String>,
    /// News of the port mapping and the join-code relay, when the player
    /// hosts.
    reach: Option<std::sync::mpsc::Receiver<String>>,
    /// The server this player started (single player, host): when it dies
    /// the player is told at once, not after a minute of reconnecting.
    local: Option<&'a mut LocalServer>,
    pending: Vec<(String, RequestTicket)>,
    /// Where the game is served, asked again at each reconnect attempt.
    directory: Option<Directory>,
    /// What to tell the player when its connection comes back.
    rejoin: Rejoin,
}

impl<'a> Player<'a> {
    pub(crate) fn connect(
        addr: &str,
        name: &str,
        password: Option<String>,
        directory: Option<Directory>,
        trust: Option<switchboard::tls::Fingerprint>,
    ) -> Self {
        let config = ClientConfig {
            password,
            // Quick at first: a game that fails over is back within a
            // second or two (docs/SCALING.md); then every half second, for
            // a minute.
            reconnect: switchboard::ReconnectPolicy {
                initial_delay: Duration::from_millis(100),
                max_delay: Duration::from_millis(500),
                max_attempts: RECONNECT_ATTEMPTS,
                ..switchboard::ReconnectPolicy::default()
            },
            ..ClientConfig::named(name)
        };
        Player {
            name: name.to_string(),
            client: NetworkClient::connect_via(
                match trust {
                    Some(fingerprint) => switchboard_hosting::JoinCodes::dialer()
                        .trust(switchboard::tls::ServerTrust::pinned(fingerprint)),
                    None => switchboard_hosting::JoinCodes::dialer(),
                },
                addr,
                config,
            ),
            seen: Seen::default(),
            link: Link::Joining,
            invite: None,
            internet: Vec::new(),
            reach: None,
            local: None,
            pending: Vec::new(),
            directory,
            rejoin: Rejoin::default(),
        }
    }

    /// The status line: the connection's state, with the countdown to the
    /// next reconnect attempt.
    pub(crate) fn status(&self) -> (String, Tone) {
        self.link.line(&self.client, RECONNECT_ATTEMPTS)
    }

    /// Why the game ended without the player's say.
    pub(crate) fn gone(&self) -> String {
        self.link
            .gone()
            .unwrap_or("the connection to the server is gone")
            .to_string()
    }

    /// Tells the player at once when the server it started has stopped.
    fn watch_local_server(&mut self) {
        let Some(server) = self.local.as_mut() else {
            return;
        };
        let Some(status) = server.exited() else {
            return;
        };
        let why = format!(
            "the local server (pid {}) stopped: {status}; progress since the last save is lost",
            server.pid()
        );
        self.local = None;
        self.seen.events.push(why.clone());
        self.link = Link::Gone(why);
        self.client.close("the local server stopped");
    }

    /// Takes in one event of the client.
    fn take(&mut self, event: ClientEvent) {
        let seen = &mut self.seen;
        match event {
            ClientEvent::Message(message) => match message.typed::<Msg>() {
                Ok(Msg::Game(GameAct::View(mut view))) => {
                    view.make_printable();
                    seen.view = Some(view);
                    seen.fresh_view = true;
                    seen.views += 1;
                }
                Ok(Msg::Game(GameAct::Event(text))) => seen.events.push(printable(&text)),
                Ok(Msg::Lobby(LobbyAct::State(mut lobby))) => {
                    lobby.make_printable();
                    seen.fresh_lobby = seen.lobby.as_ref() != Some(&lobby);
                    seen.lobbies += 1;
                    seen.lobby = Some(lobby);
                }
                Ok(_) | Err(_) => {}
            },
            ClientEvent::Refused(refused) => {
                let why = printable(&refused.reason);
                // Codes 1 to 3: the session is unknown, its token stale, or
                // it expired (docs/PROTOCOL.md).
                let why = match self.link {
                    Link::Lost(_) if (1..=3).contains(&refused.code) => format!(
                        "the server did not know your session ({why}): it restarted without \
                         the game, or kept you waiting too long"
                    ),
                    _ => format!("the server refused to let you in: {why}"),
                };
                seen.events.push(why.clone());
                self.link = Link::Gone(why);
            }
            ClientEvent::ConnectionLost(why) => {
                self.rejoin.lost(seen);
                let why = printable(&why.to_string());
                seen.events
                    .push(format!("connection lost ({why}); reconnecting"));
                self.link = Link::Lost(why);
            }
            ClientEvent::Welcomed(welcomed) => {
                if let Some(message) = self.rejoin.welcomed(welcomed.resumed, seen) {
                    seen.events.push(message);
                }
                self.link = Link::Connected;
            }
            ClientEvent::Reconnecting(_) => self.follow_directory(),
            ClientEvent::Disconnected(why) => {
                if self.link.gone().is_none() {
                    let reconnecting = matches!(self.link, Link::Lost(_));
                    let why = link::farewell(&why, reconnecting);
                    seen.events.push(format!("disconnected: {why}"));
                    self.link = Link::Gone(why);
                }
            }
            ClientEvent::Connected | ClientEvent::Error(_) | ClientEvent::RequestDone { .. } => {}
        }
    }

    /// At a reconnect attempt, asks the directory where the game is now:
    /// the next attempts go there too.
    fn follow_directory(&mut self) {
        let Some(directory) = &self.directory else {
            return;
        };
        match directory.servers() {
            Ok(servers) => self.client.redirect(servers),
            Err(err) => self
                .seen
                .events
                .push(format!("directory: {}", printable(&err))),
        }
    }

    /// Sends an order; its verdict comes out of [`pump`](Self::pump).
    pub(crate) fn order(&mut self, label: String, order: impl Into<Msg>) {
        match self.client.request(order.into()) {
            Ok(ticket) => self.pending.push((label, ticket)),
            Err(err) => self.seen.events.push(format!("{label}: not sent: {err}")),
        }
    }

    /// Polls; returns the log lines since the last call: events, and the
    /// verdicts of orders that were not simply accepted.
    pub(crate) fn pump(&mut self, wait: Duration) -> Vec<String> {
        let events: Vec<ClientEvent> = self.client.drain_timeout(wait).collect();
        for event in events {
            self.take(event);
        }
        self.watch_local_server();
        if let Some(reach) = &self.reach {
            for news in reach.try_iter() {
                self.seen.events.push(news.clone());
                // The latest of each source ("port mapping (game port
                // 7100)", "join-code relay").
                let source = |line: &str| line.split_once(": ").map(|(s, _)| s.to_string());
                match self
                    .internet
                    .iter_mut()
                    .find(|l| source(l) == source(&news))
                {
                    Some(line) => *line = news,
                    None => self.internet.push(news),
                }
            }
        }
        if let Some(message) = self.rejoin.heard(&self.seen) {
            self.seen.events.push(message);
        }
        let mut log: Vec<String> = std::mem::take(&mut self.seen.events)
            .into_iter()
            .map(|e| format!("* {e}"))
            .collect();
        let client = &self.client;
        self.pending
            .retain(|(label, ticket)| match client.status(*ticket) {
                RequestStatus::Pending => true,
                RequestStatus::Accepted => false,
                RequestStatus::Rejected(reason) => {
                    log.push(format!("{label}: rejected: {}", printable(&reason)));
                    false
                }
                RequestStatus::Failed(err) => {
                    log.push(format!("{label}: failed: {err}"));
                    false
                }
            });
        log
    }

    /// Whether every order sent has its verdict.
    fn pending_is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Like [`pump`](Self::pump), printing the log.
    fn pump_print(&mut self, wait: Duration) {
        for line in self.pump(wait) {
            println!("{line}");
        }
    }
}

/// Who plays where, and how.
pub struct Play<'a> {
    /// Where the game is served (HOST:PORT, or a `ws://` URL).
    pub addr: String,
    /// The player's name.
    pub name: String,
    /// The game's join password.
    pub password: Option<String>,
    /// A named game to follow through its masters when its server moves.
    pub directory: Option<Directory>,
    /// The server this process started (single player, host): its death
    /// ends the game at once, with its exit status.
    pub local: Option<&'a mut LocalServer>,
    /// Where others join (a hosted game), shown in the lobby.
    pub invite: Option<String>,
    /// News of the router's port mapping and the join-code relay (a
    /// hosted game): logged, and the latest shown in the lobby.
    pub reach: Option<std::sync::mpsc::Receiver<String>>,
    /// A scripted player plays this many turns.
    pub bot: Option<u32>,
    /// The typed interface, even on a terminal.
    pub text: bool,
    /// A hosting bot starts once this many players are ready.
    pub players: usize,
    /// The server's fingerprint, as its host gave it (`--trust`): the
    /// server is trusted by it alone. Without it, the first connection to
    /// a server beyond this machine remembers its key (known hosts).
    pub trust: Option<switchboard::tls::Fingerprint>,
}

/// Plays: `bot` turns of the scripted player; or, with `text` or when
/// stdout is not a terminal, typed orders; otherwise the full-screen
/// interface.
pub fn play(how: Play<'_>) -> Result<(), String> {
    let Play {
        addr,
        name,
        password,
        directory,
        local,
        invite,
        reach,
        bot,
        text,
        players,
        trust,
    } = how;
    let mut player = Player::connect(&addr, &name, password, directory, trust);
    player.invite = invite;
    player.reach = reach;
    player.local = local;
    let deadline = Instant::now() + Duration::from_secs(15);
    while !player.client.is_welcomed() {
        if player.client.is_finished() {
            return Err(format!(
                "could not join the game at {addr}: {}",
                player.gone()
            ));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "could not join the game at {addr}: no welcome in 15 s"
            ));
        }
        player.pump_print(Duration::from_millis(20));
    }
    // The host's key, as ssh shows it: pinned, or remembered on first use.
    let key = host_key(&addr, trust);
    if let Some(key) = &key {
        player.seen.events.push(key.clone());
    }
    let joined = |name: &str| match &key {
        Some(key) => println!("joined as {name}; {key}"),
        None => println!("joined as {name}"),
    };
    let result = match bot {
        Some(turns) => {
            joined(&name);
            bot::play(&mut player, turns, players)
        }
        None if !text && std::io::stdout().is_terminal() => crate::tui::run(&mut player),
        None => {
            joined(&name);
            typed::play(&mut player)
        }
    };
    player.client.close("quit");
    player.client.poll_timeout(Duration::from_millis(100));
    result
}

/// What the player is told of the key of the server at `addr`: pinned with
/// `--trust`, or the one the known-hosts file remembers for it (on first use
/// it was remembered just now; later joins were checked against it). `None`
/// for a server on this machine (plain) or one an authority vouches for.
fn host_key(addr: &str, trust: Option<switchboard::tls::Fingerprint>) -> Option<String> {
    if let Some(pinned) = trust {
        return Some(format!(
            "the host's key: sha256 {pinned} (pinned with --trust)"
        ));
    }
    let file = switchboard::tls::default_data_dir().join("known_hosts");
    let known = switchboard::tls::KnownHosts::lookup(&file, addr).ok()??;
    Some(format!(
        "the host's key: sha256 {known}, remembered in {} (compare it with the one the host \
         shows; a changed key is refused)",
        file.display()
    ))
}
