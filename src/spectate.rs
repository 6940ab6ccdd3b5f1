//! A recorded session served live, as if its server were running again:
//! spectators connect with the game's own client and see what one recorded
//! player saw, paced as it was recorded (faster or slower with `speed`),
//! from the start or from a record number. A recording started mid-game
//! is shown from the followed player's view of the game as it found it.
//! The replay is checked as it goes, exactly like
//! [`record::replay`](crate::record::replay).

use std::collections::HashMap;
use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

use crate::manager::protocol::{self, Rejected, RequestFrame, SessionHello, Welcome};
use crate::manager::{GameLogic, ManagerAction};
use crate::message::{Message, SESSION_CHANNEL};
use crate::record::{Input, ReplayError, ReplayReport, Replayer};
use crate::session::{ClientId, ReconnectToken};
use crate::socket::{
    BindScope, EndpointConfig, EndpointEvent, EndpointStream, PeerId, WebSocketConfig,
};

/// How a replay is served.
#[derive(Debug, Clone, PartialEq)]
pub struct SpectateConfig {
    /// Which interfaces to listen on (default loopback).
    pub scope: BindScope,
    /// The port spectators connect to (default 0: a free one).
    pub port: u16,
    /// How much faster than recorded (default 1; 2 is twice as fast).
    pub speed: f64,
    /// Whose view spectators get: a recorded player's name (default: the
    /// first player who joined; in a recording that starts from a
    /// snapshot, the player there connected longest).
    pub follow: Option<String>,
    /// Records fed at once, without waiting, before the pacing starts
    /// (default 0): a recording stepped to that record, spectators sent
    /// where the followed player stands then (as after a seek).
    pub skip_to: u64,
    /// The replay waits for its first spectator (default true), so that
    /// they see the game from its start.
    pub wait_for_spectator: bool,
    /// Also serve spectators over WebSocket (browsers: the JavaScript
    /// client), on this listener's port and origins (default none).
    pub websocket: Option<WebSocketConfig>,
}

impl Default for SpectateConfig {
    fn default() -> Self {
        Self {
            scope: BindScope::Loopback,
            port: 0,
            speed: 1.0,
            follow: None,
            skip_to: 0,
            wait_for_spectator: true,
            websocket: None,
        }
    }
}

/// Where a served replay listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listening {
    /// Spectators over TCP (the game's native client).
    pub addr: SocketAddr,
    /// Spectators over WebSocket, with [`SpectateConfig::websocket`].
    pub websocket: Option<SocketAddr>,
}

/// Binds the spectators' server `config` asks for (its scope, port and
/// WebSocket listener); returns it and where it listens. Every served
/// replay uses it, games' and the relay's.
pub fn listen(config: &SpectateConfig) -> std::io::Result<(EndpointStream, Listening)> {
    let server_config = EndpointConfig {
        websocket: config.websocket.clone(),
        ..EndpointConfig::default()
    };
    let server = EndpointStream::bind(config.scope, config.port, server_config)?;
    let listening = Listening {
        addr: server.local_addr(),
        websocket: server.websocket_addr(),
    };
    Ok((server, listening))
}

/// The recorded player spectators watch: found by name in the recorded
/// hellos, followed across reconnects by id.
#[derive(Debug, Default)]
struct Followed {
    /// Names of connections whose hello came, not yet welcomed.
    hellos: HashMap<PeerId, String>,
    /// The player: its id and its connection now.
    player: Option<(ClientId, Option<PeerId>)>,
}

impl Followed {
    /// Takes note of who joined: a hello in, a welcome out.
    fn learn(&mut self, input: &Input, actions: &[ManagerAction], follow: Option<&str>) {
        if let Input::Received {
            peer,
            channel: SESSION_CHANNEL,
            action: protocol::HELLO,
            content,
        } = input
        {
            if let Ok(hello) = crate::codec::decode_value::<SessionHello>(content) {
                self.hellos.insert(PeerId(*peer), hello.name);
            }
        }
        if let Input::Disconnected { peer, .. } = input {
            if let Some((_, current)) = &mut self.player {
                if *current == Some(PeerId(*peer)) {
                    *current = None;
                }
            }
        }
        for action in actions {
            let ManagerAction::Send { peer, message } = action else {
                continue;
            };
            if message.channel_id() != SESSION_CHANNEL || message.action_id() != protocol::WELCOME {
                continue;
            }
            let Ok(welcome) = message.content::<Welcome>() else {
                continue;
            };
            let name = self.hellos.remove(peer).unwrap_or_default();
            match &mut self.player {
                Some((client, current)) if *client == welcome.client => *current = Some(*peer),
                None if follow.is_none_or(|f| f == name) => {
                    self.player = Some((welcome.client, Some(*peer)))
                }
                _ => {}
            }
        }
    }

    /// Takes note of who is there when the recording begins from a
    /// snapshot (`connected`: longest connected first): the named player,
    /// or the first, is followed from the start.
    fn present(&mut self, connected: &[(PeerId, ClientId, String)], follow: Option<&str>) {
        self.player = connected
            .iter()
            .find(|(_, _, name)| follow.is_none_or(|f| f == name))
            .map(|(peer, client, _)| (*client, Some(*peer)));
    }

    /// The application messages the followed player was sent.
    fn seen<'a>(&self, actions: &'a [ManagerAction]) -> impl Iterator<Item = &'a Message> {
        let peer = self.player.and_then(|(_, peer)| peer);
        actions.iter().filter_map(move |action| {
            let (to, message) = match action {
                ManagerAction::Send { peer, message } => (std::slice::from_ref(peer), message),
                ManagerAction::SendToMany { peers, message } => (peers.as_slice(), message),
                _ => return None,
            };
            // The game's messages (rooms and relay channels included), not
            // the socket's or the session's own.
            let game = message.channel_id() > SESSION_CHANNEL;
            (game && peer.is_some_and(|p| to.contains(&p))).then_some(message)
        })
    }
}

/// What an operator can do with a served replay while it runs
/// ([`spectate_with`]).
#[derive(Debug, Clone, PartialEq)]
pub enum SpectateCommand {
    /// Holds the replay where it is (spectators stay connected).
    Pause,
    /// Goes on from where it was held, paced again from there.
    Play,
    /// Plays this much faster than recorded from now on.
    Speed(f64),
    /// Goes to a record number, back or forth: back starts the replay
    /// again from the beginning; the records up to it are fed at once, and
    /// spectators are sent the followed player's last message of each kind
    /// (a game whose messages are whole views shows that moment).
    Seek(u64),
}

/// Serves `replayer`'s recording to spectators (see the module's doc);
/// `listening` hears where, once bound. Returns what the replay did, or
/// where it diverged. Blocks: call it from plain code, not inside a tokio
/// runtime.
pub fn spectate<L: GameLogic, R: Read>(
    replayer: Replayer<L, R>,
    config: SpectateConfig,
    listening: impl FnOnce(Listening),
) -> Result<ReplayReport<L>, ReplayError> {
    let mut once = Some(replayer);
    let open = move || {
        once.take().ok_or_else(|| {
            ReplayError::Read(crate::record::RecordError::Io(std::io::Error::other(
                "this replay cannot go back: serve it with spectate_with",
            )))
        })
    };
    crate::runtime::handle().block_on(serve(open, config, listening, None))
}

/// Like [`spectate`], taking [`SpectateCommand`]s while it runs (pause,
/// play, speed, seek); `open` gives a replayer of the recording from its
/// start, again each time a seek goes back.
pub fn spectate_with<L: GameLogic, R: Read>(
    open: impl FnMut() -> Result<Replayer<L, R>, ReplayError>,
    config: SpectateConfig,
    listening: impl FnOnce(Listening),
    commands: tokio::sync::mpsc::UnboundedReceiver<SpectateCommand>,
) -> Result<ReplayReport<L>, ReplayError> {
    crate::runtime::handle().block_on(serve(open, config, listening, Some(commands)))
}

/// Commands typed on stdin, one a line: `pause`, `play`, `speed X`,
/// `seek RECORD` (read on a thread of its own; anything else is answered
/// on stderr with what it takes).
pub fn stdin_commands() -> tokio::sync::mpsc::UnboundedReceiver<SpectateCommand> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            let command = match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["pause"] => Some(SpectateCommand::Pause),
                ["play"] => Some(SpectateCommand::Play),
                ["speed", x] => x.parse().ok().map(SpectateCommand::Speed),
                ["seek", n] => n.parse().ok().map(SpectateCommand::Seek),
                _ => None,
            };
            let Some(command) = command else {
                eprintln!("? pause | play | speed X | seek RECORD");
                continue;
            };
            if tx.send(command).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next command, or never when there are none (or no more): for a
/// served replay's loop, beside its other events.
pub async fn next_command(
    commands: &mut Option<tokio::sync::mpsc::UnboundedReceiver<SpectateCommand>>,
) -> SpectateCommand {
    match commands {
        Some(rx) => match rx.recv().await {
            Some(command) => command,
            None => {
                *commands = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

/// The followed player's last message of each kind, in the order last
/// seen: what a spectator is sent after a seek.
#[derive(Debug, Default)]
struct Latest(Vec<Message>);

impl Latest {
    fn keep(&mut self, message: &Message) {
        let kind = (message.channel_id(), message.action_id());
        self.0.retain(|m| (m.channel_id(), m.action_id()) != kind);
        self.0.push(message.clone());
    }
}

/// Starts a replay: when its recording begins from a snapshot, the players
/// there are known from the start, and the followed one's view then (what
/// the game would send it coming back: the game as the recording found it)
/// is what spectators see first.
fn begin<L: GameLogic, R: Read>(
    replayer: &mut Replayer<L, R>,
    follow: Option<&str>,
) -> Result<(Followed, Vec<Message>), ReplayError> {
    let mut followed = Followed::default();
    if !replayer.begin()? {
        return Ok((followed, Vec::new()));
    }
    followed.present(&replayer.core().connected(), follow);
    let view = match followed.player {
        Some((client, _)) => replayer
            .view_of(client)
            .map_err(|why| ReplayError::Snapshot { record: 1, why })?,
        None => Vec::new(),
    };
    Ok((followed, view))
}

async fn serve<L: GameLogic, R: Read>(
    mut open: impl FnMut() -> Result<Replayer<L, R>, ReplayError>,
    config: SpectateConfig,
    listening: impl FnOnce(Listening),
    mut commands: Option<tokio::sync::mpsc::UnboundedReceiver<SpectateCommand>>,
) -> Result<ReplayReport<L>, ReplayError> {
    let (mut server, at) = listen(&config).map_err(crate::record::RecordError::Io)?;
    listening(at);
    let handle = server.handle();
    let mut spectators: Vec<PeerId> = Vec::new();
    let mut replayer = open()?;
    let (mut followed, mut opening) = begin(&mut replayer, config.follow.as_deref())?;
    let mut latest = Latest::default();
    let mut speed = if config.speed > 0.0 {
        config.speed
    } else {
        1.0
    };
    // Stepped to a record before the start: shown where the player stands.
    let (mut skip_to, mut paused, mut resend) = (config.skip_to, false, config.skip_to > 0);
    let mut paced_from: Option<(tokio::time::Instant, Duration)> = None;
    'steps: while let Some(step) = replayer.next_step()? {
        followed.learn(&step.input, &step.actions, config.follow.as_deref());
        // Wait for the step's time (and the first spectator), answering
        // spectators and taking commands meanwhile.
        loop {
            let held = paused || (config.wait_for_spectator && spectators.is_empty());
            let due = match paced_from {
                _ if step.record < skip_to => None,
                _ if held => Some(tokio::time::Instant::now() + Duration::from_secs(3600)),
                Some((wall, at)) => Some(wall + (step.at.saturating_sub(at)).div_f64(speed)),
                None => {
                    paced_from = Some((tokio::time::Instant::now(), step.at));
                    None
                }
            };
            let Some(due) = due else { break };
            tokio::select! {
                _ = tokio::time::sleep_until(due) => {
                    if !held {
                        break;
                    }
                }
                event = server.next_event() => match event {
                    Some(event) => answer(&handle, event, &mut spectators, followed.player.map(|p| p.0), &latest),
                    None => return Ok(replayer.finish()),
                },
                command = next_command(&mut commands) => {
                    paced_from = None;
                    match command {
                        SpectateCommand::Pause => paused = true,
                        SpectateCommand::Play => paused = false,
                        SpectateCommand::Speed(s) if s > 0.0 => speed = s,
                        SpectateCommand::Speed(_) => {}
                        SpectateCommand::Seek(record) => {
                            skip_to = record;
                            resend = true;
                            if record <= step.record {
                                // Back: from the beginning again.
                                replayer = open()?;
                                (followed, opening) = begin(&mut replayer, config.follow.as_deref())?;
                                latest = Latest::default();
                                continue 'steps;
                            }
                        }
                    }
                }
            }
        }
        while let Some(event) = server.try_next_event() {
            answer(
                &handle,
                event,
                &mut spectators,
                followed.player.map(|p| p.0),
                &latest,
            );
        }
        // The game as the recording found it goes first.
        let opened = std::mem::take(&mut opening);
        let seen: Vec<&Message> = opened.iter().chain(followed.seen(&step.actions)).collect();
        for message in &seen {
            latest.keep(message);
        }
        if step.record < skip_to {
            continue;
        }
        // The first step after a seek: where the followed player stands.
        let sending: Vec<&Message> = if std::mem::take(&mut resend) {
            latest.0.iter().collect()
        } else {
            seen
        };
        for message in sending {
            for peer in &spectators {
                let _ = handle.send_to(*peer, message);
            }
        }
    }
    // Every spectator gets what was queued for it, then the reason.
    handle.shutdown("the replay ended");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !spectators.is_empty() {
        match tokio::time::timeout_at(deadline, server.next_event()).await {
            Ok(Some(EndpointEvent::PeerDisconnected { peer, .. })) => {
                spectators.retain(|p| *p != peer)
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    Ok(replayer.finish())
}

/// A spectator's hello gets a welcome as the followed player, then (one
/// who comes after the replay began) where that player stands: its last
/// message of each kind, as after a seek. Its requests are rejected:
/// nothing can change in a replay.
fn answer(
    handle: &crate::socket::EndpointHandle,
    event: EndpointEvent,
    spectators: &mut Vec<PeerId>,
    followed: Option<ClientId>,
    latest: &Latest,
) {
    match event {
        EndpointEvent::Received(incoming) if incoming.message.channel_id() == SESSION_CHANNEL => {
            let peer = incoming.peer;
            match incoming.message.action_id() {
                protocol::HELLO => {
                    let welcome = Welcome {
                        client: followed.unwrap_or_else(ClientId::random),
                        token: ReconnectToken::generate(),
                        resumed: false,
                        grace_secs: 0,
                    };
                    let _ = handle.send_to(
                        peer,
                        &protocol::session_message(protocol::WELCOME, &welcome),
                    );
                    if !spectators.contains(&peer) {
                        spectators.push(peer);
                        for message in &latest.0 {
                            let _ = handle.send_to(peer, message);
                        }
                    }
                }
                protocol::REQUEST => {
                    let id = incoming
                        .message
                        .content::<RequestFrame>()
                        .map_or(0, |request| request.id);
                    let rejected = Rejected {
                        id,
                        reason: "this is a replay: watch only".into(),
                    };
                    let _ = handle.send_to(
                        peer,
                        &protocol::session_message(protocol::REJECTED, &rejected),
                    );
                }
                _ => {}
            }
        }
        EndpointEvent::PeerDisconnected { peer, .. } => spectators.retain(|p| *p != peer),
        _ => {}
    }
}
