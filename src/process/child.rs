//! The child's side: become the server, print the ready line, serve until
//! the parent says stop or goes away.

use std::io::{BufRead, Write};

use tokio_util::sync::CancellationToken;

use super::{ready_line, ENV_BIND, ENV_CHILD, ENV_PASSWORD, ENV_PORT};
use crate::manager::{GameLogic, ManagerConfig, ServerManager};
use crate::socket::BindScope;

/// Call first thing in `main`: if this process was started by
/// [`LocalServer::spawn`](super::LocalServer::spawn), it becomes the server
/// (built with `make_logic`) and exits when told to; otherwise this returns
/// at once. With the `stderr-log` feature, the child logs to stderr (which
/// the parent forwards), filtered by `RUST_LOG`.
///
/// ```no_run
/// # struct Rules;
/// # impl switchboard::GameLogic for Rules {
/// #     type Message = switchboard::Message;
/// #     type Command = ();
/// #     fn validate(&self, _: &switchboard::Request) -> Result<(), switchboard::Rejection> { Ok(()) }
/// #     fn apply(&mut self, _: switchboard::ClientId, _: (), _: &mut switchboard::Outbox) {}
/// # }
/// // First line of the game's `main`:
/// switchboard::process::serve_if_child(|| Rules);
/// // ... the game itself ...
/// ```
pub fn serve_if_child<L: GameLogic>(make_logic: impl FnOnce() -> L) {
    serve_if_child_with(|_| {}, make_logic)
}

/// Like [`serve_if_child`], with a chance to change the server's settings
/// first (a listing hook, limits).
pub fn serve_if_child_with<L: GameLogic>(
    configure: impl FnOnce(&mut ManagerConfig),
    make_logic: impl FnOnce() -> L,
) {
    if std::env::var_os(ENV_CHILD).is_none() {
        return;
    }
    #[cfg(feature = "stderr-log")]
    init_stderr_logging();
    let scope = match std::env::var(ENV_BIND).as_deref() {
        Ok("all") => BindScope::AllInterfaces,
        _ => BindScope::Loopback,
    };
    let port = std::env::var(ENV_PORT)
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let mut config = ManagerConfig {
        password: std::env::var(ENV_PASSWORD).ok().filter(|p| !p.is_empty()),
        ..ManagerConfig::default()
    };
    configure(&mut config);
    let code = match run_server(scope, port, config, make_logic(), true) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("switchboard server failed: {err}");
            1
        }
    };
    std::process::exit(code);
}

/// Runs a server in this process until it is told to stop: Ctrl-C, SIGTERM,
/// or, when `watch_stdin` is set, EOF or a `shutdown` line on stdin (how a
/// parent stops its child, and how a child notices its parent died). Prints
/// the ready line on stdout once it listens. Installs no log subscriber:
/// the program chooses (`init_stderr_logging`, behind the `stderr-log` feature, is one).
pub fn run_server<L: GameLogic>(
    scope: BindScope,
    port: u16,
    config: ManagerConfig,
    logic: L,
    watch_stdin: bool,
) -> std::io::Result<()> {
    run_server_with(scope, port, config, logic, watch_stdin, |_| {})
}

/// [`run_server`], calling `started` with the manager's handle once it
/// listens and its ready line is out, inside the server's runtime (it may
/// spawn tasks there: an admin server, say).
pub fn run_server_with<L: GameLogic>(
    scope: BindScope,
    port: u16,
    config: ManagerConfig,
    logic: L,
    watch_stdin: bool,
    started: impl FnOnce(&crate::manager::ManagerHandle),
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("switchboard-server")
        .enable_all()
        .build()?;
    let files = super::raise_open_files_limit();
    let mut config = config;
    let server = &mut config.server;
    // The game's port and its WebSocket port share one cap; 64 files are
    // left for the rest (logs, saves, Redis).
    super::share_descriptors(files.soft, 64, &mut [("game", &mut server.max_connections)]);
    runtime.block_on(async move {
        let (manager, handle) = ServerManager::bind(scope, port, config, logic)?;
        let stop = CancellationToken::new();
        if watch_stdin {
            watch_parent(stop.clone());
        }
        {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{}", ready_line(handle.local_addr().port()))?;
            stdout.flush()?;
        }
        started(&handle);
        let signals = stop.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            signals.cancel();
        });
        // On a worker, not on this thread: every batch a connection's reader
        // hands over would otherwise wake this thread from its own park (a
        // futex and a context switch per batch: 2.1x the relay's CPU per
        // delivery at 100 clients, `docs/PERFORMANCE.md`). A panic in the
        // game's logic still ends the process as one.
        if let Err(err) = tokio::spawn(manager.run(stop.cancelled_owned())).await {
            if err.is_panic() {
                std::panic::resume_unwind(err.into_panic());
            }
        }
        Ok(())
    })
}

/// Stops the server on EOF or a `shutdown` line on stdin.
fn watch_parent(stop: CancellationToken) {
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            match line {
                Ok(line) if line.trim() == "shutdown" => break,
                Ok(_) => continue,
                Err(_) => break,
            }
        }
        // Cancel before logging: when the parent died, stderr has no reader
        // any more and nothing that writes to it may stand in the way.
        stop.cancel();
        tracing::info!("stdin closed or shutdown asked: stopping");
    });
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("signal received: stopping");
}

/// Stderr that never fails: once the parent is gone, writes to its pipe
/// fail with EPIPE, and a log line must never stop the shutdown.
#[cfg(feature = "stderr-log")]
struct Stderr;

#[cfg(feature = "stderr-log")]
impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// Logs to stderr (what a parent forwards), once per process; `RUST_LOG`
/// filters (default `info`). A server on its own stamps each line with
/// its time (RFC 3339, UTC); a child leaves that to its parent, which
/// stamps what it forwards. A program that installed its own subscriber
/// keeps it. Needs the `stderr-log` feature.
#[cfg(feature = "stderr-log")]
pub fn init_stderr_logging() {
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
    };
    let fmt = tracing_subscriber::fmt()
        .with_writer(|| Stderr)
        .with_ansi(false)
        .with_target(false);
    let _ = if std::env::var_os(ENV_CHILD).is_some() {
        // The parent stamps each forwarded line with its own time.
        fmt.without_time().with_env_filter(filter()).try_init()
    } else {
        // A server on its own: each line stamped in RFC 3339 (UTC).
        fmt.with_env_filter(filter()).try_init()
    };
}
