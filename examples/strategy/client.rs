//! The player's side: the connection (following a named game through its
//! directory, told the truth when it comes back, its state in words in
//! `client/link.rs`), a terminal interface (a map and typed orders), and
//! the scripted bot player (`client/bot.rs`).

use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use switchboard::process::LocalServer;
use switchboard::{ClientConfig, ClientEvent, NetworkClient, RequestStatus, RequestTicket};

mod bot;
mod link;

pub(crate) use link::{Link, Tone};

use crate::directory::Directory;
use crate::protocol::{
    nation_digit, nation_letter, printable, Attack, GameAct, LobbyAct, LobbyView, Move, Msg,
    NationView,
};
use crate::rejoin::Rejoin;
use crate::scenario::{NationId, UnitId};

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
    /// The lobby's host, once it left (a hosted game ends with its host).
    host_left: Option<String>,
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
            client: NetworkClient::connect(addr, config),
            seen: Seen::default(),
            link: Link::Joining,
            invite: None,
            host_left: None,
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
                    let host = seen.lobby.as_ref().and_then(|l| l.host.as_ref());
                    if let Some(host) =
                        host.filter(|h| !lobby.players.iter().any(|p| &p.name == *h))
                    {
                        self.host_left = Some(host.clone());
                    }
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
                    let why = link::farewell(&why, self.host_left.as_deref(), reconnecting);
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

/// Draws a view as text: terrain, owners (letters), units (digits of their
/// nation), fog as blanks.
pub fn render(view: &NationView) -> String {
    let mut out = format!("{} — turn {}", view.scenario, view.turn);
    if let Some(you) = view.you {
        let name = view
            .nations
            .iter()
            .find(|n| n.id == you)
            .map_or("?", |n| n.name.as_str());
        out.push_str(&format!(" — you are {name} ({})", you.0));
    }
    out.push('\n');
    out.push_str("   ");
    for x in 0..view.width {
        out.push(char::from(b'0' + x % 10));
    }
    out.push('\n');
    for y in 0..view.height {
        out.push_str(&format!("{y:2} "));
        for x in 0..view.width {
            let c = match (view.unit_at(x, y), view.tile(x, y)) {
                (Some(unit), _) => nation_digit(unit.nation),
                (None, Some(tile)) => match tile.owner {
                    Some(owner) => nation_letter(owner),
                    None => tile.terrain.glyph(),
                },
                (None, None) => ' ',
            };
            out.push(c);
        }
        out.push('\n');
    }
    for n in &view.nations {
        out.push_str(&format!(
            "  {} {}{}: {} provinces{}\n",
            n.id.0,
            n.name,
            if n.ai { " (AI)" } else { "" },
            n.provinces,
            if n.ended { ", turn ended" } else { "" }
        ));
    }
    for u in view.units.iter().filter(|u| Some(u.nation) == view.you) {
        out.push_str(&format!(
            "  unit {} {:?} at ({}, {}), {} moves left\n",
            u.id.0, u.kind, u.x, u.y, u.moves_left
        ));
    }
    if let Some(winner) = view.winner {
        out.push_str(&format!("  the game is over: nation {} wins\n", winner.0));
    }
    out
}

/// The lobby as text.
pub fn render_lobby(lobby: &LobbyView) -> String {
    let mut out = format!(
        "lobby (host: {}); pick N, ready, and the host starts\n",
        lobby.host.as_deref().unwrap_or("-")
    );
    for seat in &lobby.seats {
        out.push_str(&format!(
            "  {} {}: {}{}\n",
            seat.nation.0,
            seat.name,
            seat.player.as_deref().unwrap_or("(free)"),
            if seat.ready { ", ready" } else { "" }
        ));
    }
    out.push_str(&format!("  here: {}\n", lobby_players(lobby)));
    out
}

/// Everyone who joined, as one line: "ada (Red), bob (no nation yet), cy (away)".
pub(crate) fn lobby_players(lobby: &LobbyView) -> String {
    let names: Vec<String> = lobby
        .players
        .iter()
        .map(|p| {
            let nation = p.nation.map_or("no nation yet".to_string(), |n| {
                let seat = lobby.seats.iter().find(|s| s.nation == n);
                seat.map_or(format!("nation {}", n.0), |s| s.name.clone())
            });
            let away = if p.online { "" } else { ", away" };
            format!("{} ({nation}{away})", p.name)
        })
        .collect();
    if names.is_empty() {
        "nobody".into()
    } else {
        names.join(", ")
    }
}

const HELP: &str =
    "orders: m UNIT X Y (move) | c UNIT (claim) | a UNIT TARGET (attack) | e (end turn)
        save NAME | load NAME | pick NATION | ready | start | map | help | q (quit)";

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
    /// A scripted player plays this many turns.
    pub bot: Option<u32>,
    /// The typed interface, even on a terminal.
    pub text: bool,
    /// A hosting bot starts once this many players are ready.
    pub players: usize,
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
        bot,
        text,
        players,
    } = how;
    let mut player = Player::connect(&addr, &name, password, directory);
    player.invite = invite;
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
    let result = match bot {
        Some(turns) => {
            println!("joined as {name}");
            bot::play(&mut player, turns, players)
        }
        None if !text && std::io::stdout().is_terminal() => crate::tui::run(&mut player),
        None => {
            println!("joined as {name}");
            play_typed(&mut player)
        }
    };
    player.client.close("quit");
    player.client.poll_timeout(Duration::from_millis(100));
    result
}

fn play_typed(player: &mut Player) -> Result<(), String> {
    println!("{HELP}");
    let (tx, lines) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    loop {
        player.pump_print(Duration::from_millis(20));
        if std::mem::take(&mut player.seen.fresh_lobby) {
            if let Some(lobby) = player.seen.lobby.as_ref().filter(|l| !l.started) {
                print!("{}", render_lobby(lobby));
            }
        }
        if std::mem::take(&mut player.seen.fresh_view) {
            if let Some(view) = player.seen.view.as_ref().filter(|v| v.you.is_some()) {
                print!("{}", render(view));
            }
        }
        if player.client.is_finished() {
            return Err(player.gone());
        }
        let line = match lines.try_recv() {
            Ok(line) => line,
            Err(mpsc::TryRecvError::Empty) => continue,
            Err(mpsc::TryRecvError::Disconnected) => return Ok(()),
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| words.get(i).and_then(|w| w.parse::<u32>().ok());
        match words.as_slice() {
            ["q" | "quit"] => return Ok(()),
            ["help"] => println!("{HELP}"),
            ["map"] => player.seen.fresh_view = true,
            ["m", ..] => match (num(1), num(2), num(3)) {
                (Some(u), Some(x), Some(y)) if x < 256 && y < 256 => {
                    let order = Move {
                        unit: UnitId(u),
                        x: x as u8,
                        y: y as u8,
                    };
                    player.order(line.clone(), GameAct::Move(order));
                }
                _ => println!("m UNIT X Y"),
            },
            ["c", ..] => match num(1) {
                Some(u) => player.order(line.clone(), GameAct::Claim(UnitId(u))),
                None => println!("c UNIT"),
            },
            ["a", ..] => match (num(1), num(2)) {
                (Some(u), Some(t)) => {
                    let order = Attack {
                        unit: UnitId(u),
                        target: UnitId(t),
                    };
                    player.order(line.clone(), GameAct::Attack(order));
                }
                _ => println!("a UNIT TARGET"),
            },
            ["e"] => player.order(line.clone(), GameAct::EndTurn),
            ["save", name] => player.order(line.clone(), GameAct::Save(name.to_string())),
            ["load", name] => player.order(line.clone(), GameAct::Load(name.to_string())),
            ["pick", ..] => match num(1) {
                Some(n) if n < 256 => player.order(line.clone(), LobbyAct::Pick(NationId(n as u8))),
                _ => println!("pick NATION"),
            },
            ["ready"] => player.order(line.clone(), LobbyAct::Ready(true)),
            ["start"] => player.order(line.clone(), LobbyAct::Start),
            [] => {}
            _ => println!("? {HELP}"),
        }
    }
}
