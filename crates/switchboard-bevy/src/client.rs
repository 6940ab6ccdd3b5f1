//! The client plugin: one [`Switchboard`] per app (the network client, and
//! the local server when the game runs its own), drained once per frame in
//! `PreUpdate` into Bevy messages, its connection kept as a Bevy state.

use std::time::{Duration, Instant};

use bevy_app::{App, AppExit, Last, Plugin, PreUpdate, Startup};
use bevy_ecs::prelude::*;
use bevy_state::app::{AppExtStates, StatesPlugin};
use bevy_state::prelude::{NextState, State, States};

use switchboard::client::{ClientEvent, RequestError, RequestStatus, RequestTicket};
use switchboard::message::{Message as NetMessage, TypedMessage};
use switchboard::process::SpawnError;
use switchboard::socket::Dialer;
use switchboard::socket::{SendError, SocketState};
use switchboard::{ClientConfig, ClientId, LocalServer, LocalServerOptions, NetworkClient};
use switchboard_rooms::{RoomClient, RoomClientEvent, RoomEvent, RoomState};

/// The network client of a Bevy app, and the local server it started, if
/// any. A non-`Send` resource (the client's signals live on the game's
/// thread): systems take it as `NonSend<Switchboard>` to read and
/// `NonSendMut<Switchboard>` to send.
///
/// ```no_run
/// # use bevy_ecs::prelude::*;
/// # use switchboard_bevy::Switchboard;
/// # switchboard::actions! { enum Act in Chan::Score { Add(u32) = 1 } }
/// # switchboard::channels! { enum Chan { Score = 16 } }
/// fn add_three(mut net: NonSendMut<Switchboard>) {
///     if let Err(err) = net.request(Act::Add(3)) {
///         eprintln!("not sent: {err}");
///     }
/// }
/// ```
pub struct Switchboard {
    /// Rooms are a protocol on top of any server: a client that never joins
    /// one pays a channel check per message.
    client: Option<RoomClient>,
    local: Option<LocalServer>,
    /// Said once: the local server stopped.
    local_exit_reported: bool,
}

impl std::fmt::Debug for Switchboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Switchboard")
            .field("client", &self.client.as_ref().map(|c| c.client()))
            .field("local", &self.local)
            .finish()
    }
}

impl Switchboard {
    fn new() -> Self {
        Self {
            client: None,
            local: None,
            local_exit_reported: false,
        }
    }

    /// Connects to a server ("host:port", or a `ws://` URL), closing the
    /// connection there was (a local server keeps running). Events follow
    /// from the next frame.
    pub fn connect(&mut self, addr: impl ToString, config: ClientConfig) {
        self.connect_via(Dialer::default(), addr, config);
    }

    /// Like [`connect`](Self::connect), dialing through `dialer`: a server
    /// on another machine is spoken to in TLS and checked by the dialer's
    /// trust (`Dialer::default().trust(ServerTrust::pinned(..))` pins it).
    pub fn connect_via(&mut self, dialer: Dialer, addr: impl ToString, config: ClientConfig) {
        if let Some(mut client) = self.client.take() {
            client.close("connecting elsewhere");
        }
        self.client = Some(RoomClient::connect_via(dialer, addr, config));
    }

    /// Starts the game's own server as a child process (single player on
    /// loopback, or hosting with `LocalServerOptions::scope`), waits for
    /// its ready line and connects to it. The game's `main` must begin
    /// with [`serve_if_child`](switchboard::process::serve_if_child) when
    /// `options.program` is the current executable (the default). The
    /// server stops when the app exits, or with [`Switchboard::close`].
    pub fn start_local(
        &mut self,
        options: LocalServerOptions,
        config: ClientConfig,
    ) -> Result<std::net::SocketAddr, SpawnError> {
        self.stop_local("starting another server");
        let server = LocalServer::spawn(options)?;
        let addr = server.addr();
        self.local = Some(server);
        self.local_exit_reported = false;
        self.connect(addr, config);
        Ok(addr)
    }

    /// Sends a request; its verdict comes back as a [`SwitchboardEvent`]
    /// (`ClientEvent::RequestDone` with this ticket).
    pub fn request(&mut self, message: impl TypedMessage) -> Result<RequestTicket, RequestError> {
        match self.client.as_mut() {
            Some(client) => client.client_mut().request(message),
            None => Err(RequestError::NotConnected),
        }
    }

    /// Sends a message that needs no verdict.
    pub fn send(&self, message: impl TypedMessage) -> Result<(), SendError> {
        match &self.client {
            Some(client) => client.client().send(message),
            None => Err(SendError::Closed),
        }
    }

    /// A request's verdict so far (`Pending` until its event came).
    pub fn status(&self, ticket: RequestTicket) -> RequestStatus {
        match &self.client {
            Some(client) => client.status(ticket),
            None => RequestStatus::Failed(RequestError::NotConnected),
        }
    }

    /// The client's id once a server admitted it (kept through reconnects).
    pub fn client_id(&self) -> Option<ClientId> {
        self.client.as_ref().and_then(|c| c.client().client_id())
    }

    /// The network client, for what this resource does not wrap
    /// (`subscribe`, `next_reconnect`, ...).
    pub fn client(&self) -> Option<&NetworkClient> {
        self.client.as_ref().map(|c| c.client())
    }

    /// The rooms client: `create`, `join`, `leave`, `set_ready`, `start`,
    /// `call`, `spawn`, ... and [`room`](RoomClient::room), the room as
    /// this client knows it.
    pub fn rooms(&mut self) -> Option<&mut RoomClient> {
        self.client.as_mut()
    }

    /// The room this client is in, as last heard (players, entities).
    pub fn room(&self) -> Option<&RoomState> {
        self.client.as_ref().and_then(|c| c.room_ref())
    }

    /// The local server [`start_local`](Self::start_local) started, while
    /// it runs.
    pub fn local_server(&self) -> Option<&LocalServer> {
        self.local.as_ref()
    }

    /// Closes the connection with a goodbye and stops the local server
    /// (telling its players `reason`). The app's exit does this too.
    pub fn close(&mut self, reason: &str) {
        if let Some(mut client) = self.client.take() {
            client.close(reason);
        }
        self.stop_local(reason);
    }

    /// [`close`](Self::close), then waits up to `wait` for the goodbye to
    /// leave (what the app's exit does: the process may end right after,
    /// and a player who quits should not hold a seat through the server's
    /// grace period). Events that come meanwhile are dropped.
    pub fn close_and_wait(&mut self, reason: &str, wait: Duration) {
        if let Some(mut client) = self.client.take() {
            client.close(reason);
            let deadline = Instant::now() + wait;
            while client.client().state() != SocketState::Closed && Instant::now() < deadline {
                client
                    .drain_timeout(Duration::from_millis(10))
                    .for_each(drop);
            }
        }
        self.stop_local(reason);
    }

    fn stop_local(&mut self, reason: &str) {
        if let Some(server) = self.local.take() {
            let pid = server.pid();
            match server.shutdown_with(reason) {
                Ok(status) => tracing::info!(pid, %status, "local server stopped"),
                Err(err) => tracing::warn!(pid, %err, "local server did not stop cleanly"),
            }
        }
    }

    /// The connection as a [`NetworkState`], from the client's own
    /// accessors (after the frame's events were taken).
    fn connection(&self) -> NetworkState {
        let Some(client) = self.client.as_ref().map(|c| c.client()) else {
            return NetworkState::Offline;
        };
        if client.is_finished() {
            NetworkState::Disconnected
        } else if client.is_welcomed() {
            NetworkState::Online
        } else if client.client_id().is_some() {
            NetworkState::Reconnecting
        } else {
            NetworkState::Connecting
        }
    }
}

/// Where the connection stands, as a Bevy state: `OnEnter(NetworkState::Online)`
/// runs once per welcome (the first and every resumed session, even one
/// lost and resumed between two frames), `in_state(NetworkState::Online)`
/// gates systems that send. A state gone through between two frames is
/// not entered (`Connecting`, when the welcome comes before the first
/// frame ends).
#[derive(States, Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NetworkState {
    /// No client (before `connect`, after `close`).
    #[default]
    Offline,
    /// Connecting for the first time: no welcome yet.
    Connecting,
    /// Admitted by the server.
    Online,
    /// The connection was lost; the client reconnects to get its id back.
    Reconnecting,
    /// Refused, closed, or out of reconnect attempts: no more events come.
    Disconnected,
}

/// Every event of the client, in order, once: connected, welcomed,
/// refused, messages on the game's channels, connection lost,
/// reconnecting, disconnected, errors, request verdicts. Room events come
/// as [`RoomMessage`] instead.
#[derive(Message, Debug, Clone)]
pub struct SwitchboardEvent(pub ClientEvent);

impl SwitchboardEvent {
    /// The verdict, when this is one.
    pub fn verdict(&self) -> Option<(RequestTicket, &RequestStatus)> {
        match &self.0 {
            ClientEvent::RequestDone { ticket, status } => Some((*ticket, status)),
            _ => None,
        }
    }

    /// The message, when this is one.
    pub fn message(&self) -> Option<&NetMessage> {
        match &self.0 {
            ClientEvent::Message(message) => Some(message),
            _ => None,
        }
    }
}

/// What the rooms server said (room state, players, entities, RPCs),
/// decoded. `RoomsPlugin` mirrors the entities from these.
#[derive(Message, Debug, Clone)]
pub struct RoomMessage(pub RoomEvent);

/// The local server stopped without being asked to (it crashed, or was
/// killed): the game's progress since its last save is gone, and the
/// client's reconnects will fail.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct LocalServerStopped {
    /// How it ended ("signal: 9 (SIGKILL)", "exit status: 1").
    pub status: String,
}

/// How the app starts its client.
#[derive(Debug, Clone, Default)]
enum Start {
    /// Later, from a system (`Switchboard::connect`, `start_local`).
    #[default]
    Later,
    /// A server somewhere, through a dialer.
    Connect(Dialer, String, ClientConfig),
    /// The game's own server as a child process.
    Local(LocalServerOptions, ClientConfig),
}

/// The systems of the plugin, for ordering a game's own around them.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub enum SwitchboardSystems {
    /// `PreUpdate`: the client's events become messages, the state follows.
    Receive,
    /// `PreUpdate`, after `Receive`: typed messages decoded, rooms mirrored.
    Apply,
}

/// Switchboard in a Bevy app: the [`Switchboard`] resource, the
/// [`NetworkState`] state, and each frame (in `PreUpdate`) every client event
/// as a [`SwitchboardEvent`] or [`RoomMessage`]. On `AppExit` the client
/// says goodbye (waiting up to a second for it to leave) and the local
/// server stops.
///
/// It adds Bevy's `StatesPlugin` unless the app has it: add it after
/// `DefaultPlugins` (which bring their own), or Bevy refuses the second.
///
/// Messages live two frames, as every Bevy message: read them from systems
/// that run every frame (or in `FixedUpdate`). A frame that comes late
/// loses nothing: the events wait in the client, in order, and all come
/// with the next frame.
#[derive(Debug, Clone, Default)]
pub struct SwitchboardPlugin {
    start: Start,
}

impl SwitchboardPlugin {
    /// Connects at startup to `addr` ("host:port" or a `ws://` URL).
    pub fn connect(addr: impl ToString, config: ClientConfig) -> Self {
        Self::connect_via(Dialer::default(), addr, config)
    }

    /// Like [`connect`](Self::connect), through `dialer` (its trust in the
    /// server: a pinned fingerprint).
    pub fn connect_via(dialer: Dialer, addr: impl ToString, config: ClientConfig) -> Self {
        Self {
            start: Start::Connect(dialer, addr.to_string(), config),
        }
    }

    /// Starts the game's own server as a child process at startup and
    /// connects to it (see [`Switchboard::start_local`]); if it cannot
    /// start, the app exits with the reason logged.
    pub fn local(options: LocalServerOptions, config: ClientConfig) -> Self {
        Self {
            start: Start::Local(options, config),
        }
    }
}

impl Plugin for SwitchboardPlugin {
    fn build(&self, app: &mut App) {
        if !app.is_plugin_added::<StatesPlugin>() {
            app.add_plugins(StatesPlugin);
        }
        let start = self.start.clone();
        app.insert_non_send(Switchboard::new())
            .init_state::<NetworkState>()
            .add_message::<SwitchboardEvent>()
            .add_message::<RoomMessage>()
            .add_message::<LocalServerStopped>()
            .configure_sets(
                PreUpdate,
                (SwitchboardSystems::Receive, SwitchboardSystems::Apply).chain(),
            )
            .add_systems(
                Startup,
                move |mut net: NonSendMut<Switchboard>, mut exit: MessageWriter<AppExit>| {
                    start_client(&mut net, start.clone(), &mut exit)
                },
            )
            .add_systems(PreUpdate, receive.in_set(SwitchboardSystems::Receive))
            .add_systems(Last, close_on_exit);
    }
}

fn start_client(net: &mut Switchboard, start: Start, exit: &mut MessageWriter<AppExit>) {
    match start {
        Start::Later => {}
        Start::Connect(dialer, addr, config) => net.connect_via(dialer, addr, config),
        Start::Local(options, config) => {
            if let Err(err) = net.start_local(options, config) {
                tracing::error!(%err, "the local server did not start");
                exit.write(AppExit::error());
            }
        }
    }
}

/// Takes every event the client has, in order; keeps the state current.
fn receive(
    mut net: NonSendMut<Switchboard>,
    mut events: MessageWriter<SwitchboardEvent>,
    mut rooms: MessageWriter<RoomMessage>,
    mut stopped: MessageWriter<LocalServerStopped>,
    state: Res<State<NetworkState>>,
    mut next: ResMut<NextState<NetworkState>>,
) {
    let net = &mut *net;
    let mut welcomed = false;
    if let Some(client) = net.client.as_mut() {
        for event in client.drain() {
            match event {
                RoomClientEvent::Client(event) => {
                    welcomed |= matches!(event, ClientEvent::Welcomed(_));
                    events.write(SwitchboardEvent(event));
                }
                RoomClientEvent::Room(event) => {
                    rooms.write(RoomMessage(event));
                }
            }
        }
    }
    if let Some(server) = net.local.as_mut() {
        if let Some(status) = server.exited() {
            if !net.local_exit_reported {
                net.local_exit_reported = true;
                tracing::error!(pid = server.pid(), %status, "the local server stopped");
                stopped.write(LocalServerStopped {
                    status: status.to_string(),
                });
            }
        }
    }
    // A state the frame went through and out of again is not entered
    // (connecting and welcomed between two frames goes straight to
    // `Online`), but every welcome enters `Online`, even from `Online`: a
    // connection lost and resumed between two frames runs
    // `OnEnter(NetworkState::Online)` again.
    let now = net.connection();
    if *state.get() != now || (welcomed && now == NetworkState::Online) {
        next.set(now);
    }
}

/// How long the app's exit waits for the goodbye to leave.
const EXIT_WAIT: Duration = Duration::from_secs(1);

fn close_on_exit(mut exits: MessageReader<AppExit>, mut net: NonSendMut<Switchboard>) {
    if exits.read().next().is_some() {
        net.close_and_wait("the game quit", EXIT_WAIT);
    }
}
