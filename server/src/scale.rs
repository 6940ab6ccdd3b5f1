//! Scale-out on Redis (docs/SCALING.md): the `--redis` options every mode
//! shares, the rooms directory, and the matchmaker mode.

use std::net::SocketAddr;

use clap::Args;
use switchboard::socket::BindScope;
use switchboard::ManagerConfig;
use switchboard_matchmaker::{Matchmaker, MatchmakerConfig};
use switchboard_redis::{RedisConfig, RedisSessions, RedisStore, RoomsPresence, Serving};
use switchboard_rooms::directory::DirectoryLink;

/// State shared with other processes through Redis.
#[derive(Debug, Args)]
pub(crate) struct RedisArgs {
    /// Share state with other processes through this Redis
    /// (`redis://host:6379/`); without it, everything stays in this process.
    #[arg(long, env = "SWITCHBOARD_REDIS", hide_env_values = true)]
    redis: Option<String>,
    /// Prefix of every key this service writes in Redis.
    #[arg(long, default_value = "switchboard")]
    redis_prefix: String,
}

impl RedisArgs {
    /// Sessions shared through Redis, when `--redis` names one: a client
    /// whose server died resumes on another with its id.
    pub(crate) fn share_sessions(&self, config: &mut ManagerConfig) -> Result<(), String> {
        if let Some(store) = self.open()? {
            let sessions = RedisSessions::new(store);
            config.shared_sessions = Some(switchboard::manager::SharedSessionsHook::new(sessions));
        }
        Ok(())
    }

    /// The shared store, when `--redis` names one.
    pub(crate) fn open(&self) -> Result<Option<RedisStore>, String> {
        let Some(url) = &self.redis else {
            return Ok(None);
        };
        let config = RedisConfig {
            url: url.clone(),
            prefix: self.redis_prefix.clone(),
            ..RedisConfig::default()
        };
        RedisStore::open(config)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

/// This rooms server's place in the service's room directory.
pub(crate) fn join_room_directory(store: RedisStore) -> Result<(DirectoryLink, Serving), String> {
    switchboard::runtime::handle()
        .block_on(RoomsPresence::join(store))
        .map_err(|e| format!("cannot join the room directory: {e}"))
}

#[derive(Debug, Args)]
pub(crate) struct MatchmakerArgs {
    /// Who may connect: `loopback` (this machine only) or `all` (every
    /// interface).
    #[arg(long, default_value = "loopback", value_parser = crate::parse_scope)]
    bind: BindScope,
    /// Its port.
    #[arg(long, default_value_t = 7300)]
    port: u16,
    /// Seconds a reserved seat waits for its player.
    #[arg(long, default_value_t = 10)]
    reservation_secs: u64,
    #[command(flatten)]
    redis: RedisArgs,
    #[command(flatten)]
    admin: crate::AdminArgs,
    #[command(flatten)]
    allocator: AllocatorArgs,
}

/// `--agones-allocator`: new matches on game servers the fleet's Agones
/// allocator hands over (docs/DEPLOY.md).
#[derive(Debug, clap::Args)]
struct AllocatorArgs {
    /// Agones's allocator service (`https://HOST:PORT`): each new room goes
    /// to a game server it allocates from the fleet (a server with a room
    /// free first, else a Ready one), over mutual TLS.
    #[arg(long, value_name = "URL", requires_all = ["agones_allocator_ca", "agones_allocator_cert", "agones_allocator_key"])]
    agones_allocator: Option<String>,
    /// The CA the allocator's certificate is checked against (PEM).
    #[arg(long, value_name = "PEM")]
    agones_allocator_ca: Option<std::path::PathBuf>,
    /// This matchmaker's client certificate for the allocator (PEM).
    #[arg(long, value_name = "PEM")]
    agones_allocator_cert: Option<std::path::PathBuf>,
    /// Its private key (PEM).
    #[arg(long, value_name = "PEM")]
    agones_allocator_key: Option<std::path::PathBuf>,
    /// The name on the allocator's certificate, when not the URL's host.
    #[arg(long, value_name = "NAME")]
    agones_allocator_name: Option<String>,
    /// The fleet to allocate from.
    #[arg(long, value_name = "NAME", default_value = "switchboard-rooms")]
    agones_fleet: String,
    /// The fleet's namespace.
    #[arg(long, value_name = "NS", default_value = "default")]
    agones_namespace: String,
}

impl AllocatorArgs {
    /// The allocator's client, if asked for (inside the runtime).
    fn client(self) -> Result<Option<switchboard_agones::allocator::Allocator>, String> {
        let (Some(url), Some(ca), Some(cert), Some(key)) = (
            self.agones_allocator,
            self.agones_allocator_ca,
            self.agones_allocator_cert,
            self.agones_allocator_key,
        ) else {
            return Ok(None);
        };
        let config = switchboard_agones::allocator::AllocatorConfig {
            server_name: self.agones_allocator_name,
            namespace: self.agones_namespace,
            fleet: self.agones_fleet,
            ..switchboard_agones::allocator::AllocatorConfig::new(url, ca, cert, key)
        };
        switchboard_agones::allocator::Allocator::new(config)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

pub(crate) fn run_matchmaker(mut args: MatchmakerArgs) -> Result<(), String> {
    switchboard::process::init_stderr_logging();
    args.admin.fit_listeners(Vec::new());
    let ip = args.bind.ip();
    crate::runtime()?.block_on(async move {
        let store = args
            .redis
            .open()?
            .ok_or("the matchmaker needs --redis URL")?;
        let config = MatchmakerConfig {
            reservation_ttl: std::time::Duration::from_secs(args.reservation_secs.max(1)),
            ..MatchmakerConfig::default()
        };
        let addr = SocketAddr::new(ip, args.port);
        let mut builder = Matchmaker::builder(store);
        if let Some(allocator) = args.allocator.client()? {
            builder = builder.allocator(allocator);
        }
        let (matchmaker, handle) = builder
            .config(config)
            .bind(args.bind)
            .port(args.port)
            .build()
            .map_err(|e| format!("cannot bind the matchmaker to {addr}: {e}"))?;
        println!(
            "{}",
            switchboard::process::ready_line(handle.local_addr().port())
        );
        let source = switchboard_matchmaker::MatchmakerAdmin::new(handle);
        let _admin = args.admin.start(source).await?;
        matchmaker
            .run(switchboard::process::wait_for_signal())
            .await;
        Ok(())
    })
}
