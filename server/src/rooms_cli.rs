//! `switchboard-server rooms`: its options and how it runs.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use clap::Args;
use switchboard::socket::BindScope;
use switchboard::ManagerConfig;

use crate::scale::{self, RedisArgs};
use crate::{hosting_cli, parse_scope, run_manager, web, AdminArgs, Listen};

#[derive(Debug, Args)]
pub(crate) struct RoomsArgs {
    /// Who may connect: `loopback` (this machine only) or `all` (every
    /// interface).
    #[arg(long, default_value = "loopback", value_parser = parse_scope)]
    bind: BindScope,
    /// Record every input to FILE, for `switchboard-server replay FILE`
    /// (not with `--redis`: a directory's reservations are checked against
    /// the wall clock and the service's key, which a replay cannot have).
    #[arg(long, value_name = "FILE")]
    record: Option<std::path::PathBuf>,
    /// The native (Switchboard) port; 0 picks a free one.
    #[arg(long, default_value_t = 7100)]
    port: u16,
    /// Seconds a disconnected player keeps its session (and its place in
    /// its room) for a reconnect.
    #[arg(long, default_value_t = 60)]
    grace_secs: u64,
    /// Sessions held at once.
    #[arg(long, default_value_t = 1024)]
    max_sessions: usize,
    /// Stop when stdin closes.
    #[arg(long)]
    watch_stdin: bool,
    /// Also take unchanged AxisPy games on this port (AxisPy's own default
    /// is 8765): `ws://HOST:PORT/<room>` joins the room of that name.
    #[arg(long)]
    axispy_port: Option<u16>,
    /// With `--redis`: where clients reach this server (`host:port`), as
    /// the matchmaker tells them (default: 127.0.0.1 and the port bound).
    #[arg(long)]
    advertise: Option<String>,
    #[command(flatten)]
    redis: RedisArgs,
    #[command(flatten)]
    ws: web::WsArgs,
    #[command(flatten)]
    quic: crate::quic_cli::QuicArgs,
    #[command(flatten)]
    tls: crate::tls_cli::TlsArgs,
    #[command(flatten)]
    tokens: crate::token_cli::TokenArgs,
    #[command(flatten)]
    map: hosting_cli::MapArgs,
    #[command(flatten)]
    link: hosting_cli::LinkArgs,
    #[command(flatten)]
    admin: AdminArgs,
    #[command(flatten)]
    agones: crate::agones_cli::AgonesArgs,
}

/// `switchboard-server rooms`: rooms, lobby and RPC as a dedicated server,
/// alone or as one of a directory's rooms processes (`--redis`).
pub(crate) fn run_rooms(args: RoomsArgs) -> Result<(), String> {
    switchboard::process::init_stderr_logging();
    let agones = args.agones.connect()?;
    // In a fleet, players reach the server at the node's mapped port.
    let advertise = args
        .advertise
        .clone()
        .or_else(|| agones.as_ref()?.public_addr("game"));
    let mut config = ManagerConfig::default();
    config.rules.sessions.grace_period = Duration::from_secs(args.grace_secs);
    config.rules.sessions.max_sessions = args.max_sessions;
    args.ws.apply(&mut config.server, web::Pages::Client);
    args.quic.apply(&mut config.server);
    args.tls.apply(&mut config.server, args.bind)?;
    let mut logic = switchboard_rooms::RoomsLogic::new();
    config.record = args.record.map(switchboard::manager::RecordConfig::to);
    // With Redis: one of the service's rooms processes (docs/SCALING.md).
    let serving = match args.redis.open()? {
        Some(_) if config.record.is_some() => {
            return Err("--record is not for a rooms server in a directory (--redis): its reservations are checked against the wall clock and the service's key, which a replay cannot have".into());
        }
        Some(store) => {
            let (link, serving) = scale::join_room_directory(store)?;
            logic = logic.with_directory(link);
            Some(serving)
        }
        None => None,
    };
    let listen = Listen {
        bind: args.bind,
        port: args.port,
        watch_stdin: args.watch_stdin,
        map: args.map.clone(),
        link: args.link.clone(),
        agones: agones.map(|agones| {
            let rooms = switchboard_rooms::RoomLimits::default().max_rooms as u64;
            let shape = crate::agones_cli::ManagerReport {
                rooms_capacity: Some(rooms),
            };
            (agones, shape)
        }),
    };
    let mut axispy_config = switchboard_axispy::AxisPyConfig {
        grace: Duration::from_secs(args.grace_secs),
        tls: config.server.tls.clone(),
        ..Default::default()
    };
    let mut admin = args.admin;
    admin.tls = config.server.tls.clone();
    let mut caps = vec![("game", &mut config.server.max_connections)];
    if args.axispy_port.is_some() {
        caps.push(("axispy", &mut axispy_config.max_connections));
    }
    admin.fit_listeners(caps);
    let axispy_port = args.axispy_port;
    let bind = listen.bind;
    let axispy = move |handle: &switchboard::ManagerHandle| {
        if let Some(serving) = serving {
            let bound = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), handle.local_addr().port());
            let fingerprint = handle.tls().map(|tls| tls.fingerprint());
            serving.at_pinned(advertise.unwrap_or_else(|| bound.to_string()), fingerprint);
        }
        let Some(port) = axispy_port else { return };
        let built = switchboard_axispy::AxisPyListener::builder(handle.clone())
            .config(axispy_config)
            .bind(bind)
            .port(port)
            .build();
        match built {
            Ok((listener, at)) => {
                println!("AxisPy clients: ws://{}/<room>", at.local_addr());
                // It serves as long as the rooms server runs.
                tokio::spawn(listener.run());
            }
            Err(err) => tracing::error!(%err, "AxisPy listener not started"),
        }
    };
    run_manager("rooms", listen, config, logic, admin, axispy)
}
