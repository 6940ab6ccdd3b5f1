//! `switchboard-server rendezvous`: a public join-code relay, for hosts
//! whose router forwards nothing (`docs/HOSTING.md`).

use super::*;
use switchboard_hosting::{RendezvousConfig, RendezvousServer};

#[derive(Debug, Args)]
pub(crate) struct RendezvousArgs {
    /// Who may connect: `loopback` (this machine only) or `all` (a public
    /// relay).
    #[arg(long, default_value = "loopback", value_parser = parse_scope)]
    bind: BindScope,
    /// The port hosts and TCP players connect to; 0 picks a free one.
    #[arg(long, default_value_t = 7400)]
    port: u16,
    /// Also take players over WebSocket on this port (`ws://HOST:PORT/CODE`).
    #[arg(long)]
    ws_port: Option<u16>,
    /// Codes one address holds at once.
    #[arg(long, default_value_t = 4)]
    max_codes_per_address: usize,
    /// Players one code pipes at once.
    #[arg(long, default_value_t = 64)]
    max_players_per_code: usize,
    /// Bytes a second one code's players and host send through the relay
    /// (past it the relay reads more slowly; nothing is dropped).
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    bytes_per_second_per_code: u64,
    /// Seconds a code lives with no player.
    #[arg(long, default_value_t = 3600)]
    idle_expiry_secs: u64,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// TLS to other machines: hosts' control connections and browsers'
    /// `wss://` (players' own TLS with their host is piped as it is).
    #[command(flatten)]
    tls: tls_cli::TlsArgs,
}

pub(crate) fn run_rendezvous(args: RendezvousArgs) -> Result<(), String> {
    switchboard::process::init_stderr_logging();
    let mut config = RendezvousConfig {
        max_codes_per_address: args.max_codes_per_address,
        max_players_per_code: args.max_players_per_code,
        bytes_per_second_per_code: args.bytes_per_second_per_code,
        idle_expiry: Duration::from_secs(args.idle_expiry_secs),
        tls: args.tls.settings(args.bind)?,
        ..RendezvousConfig::default()
    };
    // Every player costs the relay two descriptors (its own connection and
    // the host's data connection): raise the limit, and keep the relay's
    // connection cap within it.
    let files = switchboard::process::raise_open_files_limit();
    switchboard::process::share_descriptors(
        files.soft,
        RESERVED_FILES,
        &mut [("rendezvous", &mut config.max_connections)],
    );
    let runtime = runtime_with(args.threads)?;
    runtime.block_on(async move {
        let mut builder = RendezvousServer::builder()
            .bind(args.bind)
            .port(args.port)
            .config(config);
        if let Some(port) = args.ws_port {
            builder = builder.websocket_port(port);
        }
        let relay = builder.spawn().map_err(|e| e.to_string())?;
        println!(
            "{}",
            switchboard::process::ready_line(relay.local_addr().port())
        );
        if let Some(ws) = relay.websocket_addr() {
            // The line every mode prints for its WebSocket port; players
            // add the join code to it.
            let scheme = if relay.tls_fingerprint().is_some() {
                "wss"
            } else {
                "ws"
            };
            println!("WebSocket clients: {scheme}://{ws}/");
            println!("WebSocket players join at {scheme}://{ws}/<code>");
        }
        switchboard::process::wait_for_signal().await;
        let stats = relay.stats();
        let _ = relay.shutdown().await;
        tracing::info!(?stats, "join-code relay stopped");
        Ok(())
    })
}
