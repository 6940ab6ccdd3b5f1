//! `switchboard-server master`: the master server, its registry in memory
//! or in Redis (`--redis`).

use std::io::Write;
use std::time::Duration;

use clap::Args;
use switchboard::socket::BindScope;
use switchboard_master::{self as master, ListingPort, MasterBuilder, MasterConfig, MasterServer};
use switchboard_torque::{TorqueConfig, TorquePort};

use crate::{parse_scope, runtime, AdminArgs, RedisArgs};

#[derive(Debug, Args)]
pub(crate) struct MasterArgs {
    /// Who may connect: `loopback` (this machine only) or `all` (every
    /// interface).
    #[arg(long, default_value = "loopback", value_parser = parse_scope)]
    bind: BindScope,
    /// UDP and TCP port.
    #[arg(long, default_value_t = master::DEFAULT_PORT)]
    port: u16,
    /// Seconds after which a silent server is dropped (a server that stops
    /// cleanly says goodbye and is dropped at once).
    #[arg(long, default_value_t = 20.0)]
    expiry_secs: f64,
    /// Servers listed at most.
    #[arg(long, default_value_t = 10_000)]
    max_servers: usize,
    /// Servers listed per address at most (`--max-per-ip`, its old name,
    /// is still read).
    #[arg(long, alias = "max-per-ip", default_value_t = 32)]
    max_per_address: usize,
    /// Heartbeats per minute answered per IP.
    #[arg(long, default_value_t = 30.0)]
    heartbeats_per_minute: f64,
    /// Also serve Torque games (TGE, TGEA, Torque3D) on this UDP port
    /// (`docs/TORQUE.md`; 28002 is the engine's customary port, 0 picks
    /// one); off without it.
    #[arg(long, value_name = "PORT")]
    torque_port: Option<u16>,
    /// Seconds after which a silent Torque server is dropped (the engine
    /// heartbeats every 120 s).
    #[arg(long, default_value_t = 180.0)]
    torque_expiry_secs: f64,
    #[command(flatten)]
    redis: RedisArgs,
    #[command(flatten)]
    admin: AdminArgs,
}

pub(crate) fn run_master(args: MasterArgs) -> Result<(), String> {
    let config = MasterConfig {
        expiry: Duration::from_secs_f64(args.expiry_secs.max(0.1)),
        max_servers: args.max_servers,
        max_servers_per_address: args.max_per_address,
        heartbeats_per_minute: args.heartbeats_per_minute,
        tick_interval: Duration::from_secs_f64((args.expiry_secs / 10.0).clamp(0.05, 1.0)),
        ..MasterConfig::default()
    };
    switchboard::process::init_stderr_logging();
    switchboard::process::raise_open_files_limit();
    let torque = TorqueConfig {
        expiry: Duration::from_secs_f64(args.torque_expiry_secs.max(0.1)),
        ..TorqueConfig::default()
    };
    let builder = MasterServer::builder()
        .bind(args.bind)
        .port(args.port)
        .config(config);
    runtime()?.block_on(async move {
        match args.redis.open()? {
            Some(store) => {
                let registry = switchboard_redis::RedisRegistry::new(store);
                with_torque(
                    builder.registry(registry),
                    args.torque_port,
                    torque,
                    &args.admin,
                )
                .await
            }
            None => with_torque(builder, args.torque_port, torque, &args.admin).await,
        }
    })
}

/// Serves the master, with Torque's port when `--torque-port` asked for it.
async fn with_torque<R: master::Registry>(
    builder: MasterBuilder<R>,
    torque_port: Option<u16>,
    torque: TorqueConfig,
    admin: &AdminArgs,
) -> Result<(), String> {
    match torque_port {
        Some(port) => {
            let builder = builder.listing_port(port, |master| TorquePort::new(torque, master));
            serve_master(builder, admin).await
        }
        None => serve_master(builder, admin).await,
    }
}

async fn serve_master<R: master::Registry, P: ListingPort<R>>(
    builder: MasterBuilder<R, P>,
    admin: &AdminArgs,
) -> Result<(), String> {
    let (server, handle) = builder
        .build()
        .map_err(|e| format!("cannot bind the master: {e}"))?;
    println!(
        "{}",
        switchboard::process::ready_line(handle.local_addr().port())
    );
    if let Some(torque) = handle.listing_port_addr() {
        // After the ready line, whoever started the master may have
        // stopped reading: a closed stdout is not the master's failure.
        let _ = writeln!(
            std::io::stdout(),
            "Torque games: udp://{torque} (set $pref::Master0 = \"2:HOST:{}\")",
            torque.port()
        );
    }
    let source = master::MasterAdmin::new(handle.clone());
    let _admin = admin.start(source).await?;
    server.run(switchboard::process::wait_for_signal()).await;
    Ok(())
}
