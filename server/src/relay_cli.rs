//! `switchboard-server relay`: the real-time relay, its JSON listener, its
//! zones shared through Redis, its admin server.

use super::*;

#[derive(Debug, Args)]
pub(crate) struct RelayArgs {
    /// Who may connect: `loopback` (this machine only) or `all` (every
    /// interface).
    #[arg(long, default_value = "loopback", value_parser = parse_scope)]
    bind: BindScope,
    /// The native (Switchboard) port.
    #[arg(long, default_value_t = 7200)]
    port: u16,
    /// Record every call into the relay's core to FILE, for
    /// `switchboard-server replay FILE` (docs/RECORDING.md).
    #[arg(long, value_name = "FILE")]
    record: Option<std::path::PathBuf>,
    /// Also listen for newline-delimited JSON clients on this port.
    #[arg(long)]
    json_port: Option<u16>,
    /// The longest, in milliseconds, a relayed message waits to share a
    /// write when the relay is busy (0: never waits); a quiet relay writes
    /// at once.
    #[arg(long, default_value_t = 5)]
    send_interval_ms: u64,
    /// Deliveries a second under which every delivery is written at once.
    #[arg(long, default_value_t = 100_000)]
    quiet_rate: u32,
    /// Milliseconds that players' messages may wait for the relay, on
    /// average, before it counts as falling behind and makes them wait to
    /// share writes whatever the rate (0: the rate alone decides).
    #[arg(long, default_value_t = 2.0)]
    behind_ms: f64,
    /// A round of writes to this many players or more is shared among the
    /// relay's threads (0: one thread writes every round).
    #[arg(long, default_value_t = 16)]
    split_flush_at: usize,
    /// Tick mode: each player's deliveries are written together, once per
    /// tick at most, at this rate (replaces --send-interval-ms, --quiet-rate
    /// and --behind-ms): fewer writes for a busy relay, up to a tick more
    /// latency.
    #[arg(long)]
    tick_hz: Option<f64>,
    /// Threads serving the relay (several relays on one machine share its
    /// cores: one each is enough).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// With `--redis`: where players reach this relay (`host:port`), as
    /// other relays hand them over (default: 127.0.0.1 and the port bound;
    /// WebSocket players: the same host, the WebSocket port).
    #[arg(long)]
    advertise: Option<String>,
    /// Interest by distance inside zones: a player hears those within this
    /// distance (in the game's units), nearer ones more often (off: a zone's
    /// players all hear each other).
    #[arg(long)]
    view_radius: Option<f32>,
    /// With `--view-radius`: a player in view goes out of it past this
    /// distance (default 1.2 times the view radius: no flicker at the edge).
    #[arg(long)]
    leave_radius: Option<f32>,
    /// With `--view-radius`: a player's view is recomputed when it moved
    /// this far (default 1).
    #[arg(long)]
    min_move: Option<f32>,
    /// With `--view-radius`: the two axes of the ground plane, `xz` (y up,
    /// the default) or `xy` (z up).
    #[arg(long, default_value = "xz", value_parser = parse_plane)]
    plane: [usize; 2],
    /// Players who take compact transforms get positions rounded to this
    /// (in the game's units: 0.01 is a centimetre if the unit is a metre).
    #[arg(long, default_value_t = 0.01)]
    precision: f32,
    #[command(flatten)]
    redis: RedisArgs,
    #[command(flatten)]
    ws: web::WsArgs,
    #[command(flatten)]
    quic: crate::quic_cli::QuicArgs,
    #[command(flatten)]
    tls: crate::tls_cli::TlsArgs,
    #[command(flatten)]
    map: crate::hosting_cli::MapArgs,
    #[command(flatten)]
    admin: AdminArgs,
    #[command(flatten)]
    agones: crate::agones_cli::AgonesArgs,
}

pub(crate) fn run_relay(args: RelayArgs) -> Result<(), String> {
    switchboard::process::init_stderr_logging();
    args.map.check(args.bind)?;
    let agones = args.agones.connect()?;
    // In a fleet, players reach the relay at the node's mapped ports.
    let mapped = |name: &str| agones.as_ref()?.public_addr(name);
    let advertise = args.advertise.clone().or_else(|| mapped("game"));
    let (mapped_ws, mapped_quic) = (mapped("websocket"), mapped("quic"));
    let runtime = runtime_with(args.threads)?;
    runtime.block_on(async move {
        let mut config = switchboard_relay::RelayConfig {
            json_port: args.json_port,
            pacing: switchboard::socket::PacerConfig {
                max_wait: std::time::Duration::from_millis(args.send_interval_ms),
                quiet_rate: args.quiet_rate,
                behind_after: std::time::Duration::try_from_secs_f64(args.behind_ms / 1000.0)
                    .unwrap_or_default(),
                split_flush_at: args.split_flush_at,
            },
            compact_precision: args.precision,
            record: args.record.clone(),
            ..Default::default()
        };
        if let Some(hz) = args.tick_hz {
            config.pacing = switchboard::socket::PacerConfig {
                split_flush_at: args.split_flush_at,
                ..switchboard::socket::PacerConfig::tick(hz)
            };
        }
        config.interest = args.view_radius.map(|view| {
            switchboard_relay::interest::InterestConfig::around(
                view,
                args.leave_radius,
                args.min_move,
                args.plane,
            )
        });
        // Many players arrive at once (a load test, a server restart).
        config.server.max_pending_handshakes = 1024;
        config.server.max_connections = 20_000;
        args.ws.apply(&mut config.server, web::Pages::RelayDemo);
        args.quic.apply(&mut config.server);
        args.tls.apply(&mut config.server, args.bind)?;
        let mut admin = args.admin;
        admin.tls = config.server.tls.clone();
        let mut caps = vec![("game", &mut config.server.max_connections)];
        if config.json_port.is_some() {
            caps.push(("json", &mut config.max_json_connections));
        }
        admin.fit_listeners(caps);
        // With Redis: one of the service's relays, each zone on one of them.
        let serving = match args.redis.open()? {
            Some(store) => {
                let (zones, serving) = switchboard_redis::RedisZones::join(store)
                    .await
                    .map_err(|e| format!("cannot join the relays' zone directory: {e}"))?;
                config.zones = Some(zones);
                Some(serving)
            }
            None => None,
        };
        let relay = switchboard_relay::RelayServer::builder()
            .bind(args.bind)
            .port(args.port)
            .config(config)
            .spawn()
            .map_err(|e| format!("cannot bind the relay: {e}"))?;
        if let Some(serving) = serving {
            // Clients reach this relay at the advertised host (default
            // 127.0.0.1), on its native, WebSocket and QUIC ports.
            let port = relay.native_addr().port();
            let addr = advertise
                .clone()
                .unwrap_or_else(|| format!("127.0.0.1:{port}"));
            let host = addr.rsplit_once(':').map_or("127.0.0.1", |(host, _)| host);
            let at_host = |port: u16| format!("{host}:{port}");
            let websocket = relay
                .websocket_addr()
                .map(|ws| mapped_ws.clone().unwrap_or_else(|| at_host(ws.port())));
            let quic = relay
                .quic_addr()
                .map(|quic| mapped_quic.clone().unwrap_or_else(|| at_host(quic.port())));
            // Browsers on WebTransport are handed over to its WebTransport,
            // trusting the certificates whose hashes it publishes.
            serving.at_all_with_webtransport(addr, websocket, quic, relay.webtransport());
        }
        println!(
            "{}",
            switchboard::process::ready_line(relay.native_addr().port())
        );
        web::announce(
            relay.websocket_addr(),
            relay.tls().is_some(),
            web::Pages::RelayDemo,
        );
        crate::quic_cli::announce(relay.quic_addr(), relay.webtransport());
        if let Some(json) = relay.json_addr() {
            println!("JSON clients: {json}");
        }
        let mut ports = crate::hosting_cli::ports_to_map(
            ("relay", relay.native_addr().port()),
            relay.websocket_addr(),
            relay.quic_addr(),
        );
        ports.extend(
            relay
                .json_addr()
                .map(|json| ("JSON", json.port(), switchboard_hosting::Protocol::Tcp)),
        );
        let maps = args.map.start(&ports);
        let source = switchboard_relay::RelayAdmin::new(relay.clone())
            .with_recordings(admin.record_dir.clone());
        let _admin = admin.start(source).await?;
        let over = std::sync::Arc::new(tokio::sync::Notify::new());
        let failure = crate::agones_cli::Failure::default();
        let _fleet = agones
            .map(|agones| crate::agones_cli::serve_relay(agones, &relay, &over, failure.clone()));
        tokio::select! {
            _ = switchboard::process::wait_for_signal() => {}
            _ = over.notified() => {}
        }
        let stopped = relay.shutdown().await.map_err(|e| e.to_string());
        // The mappers run on threads of their own: this waits for them (a
        // timeout at most), the relay being stopped already.
        maps.stop();
        failure.or(stopped)
    })
}

fn parse_plane(plane: &str) -> Result<[usize; 2], String> {
    match plane {
        "xz" => Ok([0, 2]),
        "xy" => Ok([0, 1]),
        other => Err(format!("{other:?}: the plane is xz (y up) or xy (z up)")),
    }
}
