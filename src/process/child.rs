//! The child's side: become the server, print the ready line, serve until
//! the parent says stop or goes away.

use std::io::BufRead;

use super::{ENV_BIND, ENV_CHILD, ENV_PASSWORD, ENV_PORT};
use crate::manager::{GameLogic, ServerBuilder};
use crate::socket::BindScope;

/// Call first thing in `main`: if this process was started by
/// [`LocalServer::spawn`](super::LocalServer::spawn), it becomes the server
/// and exits when told to; otherwise this returns at once. `make_server`
/// gives the logic, or a [`ServerBuilder`] with settings of its own (a
/// listing hook, limits); the child binds where its parent said, with the
/// parent's join password, and stops when its stdin ends. With the
/// `stderr-log` feature, the child logs to stderr (which the parent
/// forwards), filtered by `RUST_LOG`.
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
pub fn serve_if_child<'a, L: GameLogic, B: Into<ServerBuilder<'a, L>>>(
    make_server: impl FnOnce() -> B,
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
    let password = std::env::var(ENV_PASSWORD).ok().filter(|p| !p.is_empty());
    let server = make_server()
        .into()
        .bind(scope)
        .port(port)
        .password(password)
        .watch_stdin(true);
    let code = match server.run() {
        Ok(_) => 0,
        Err(err) => {
            eprintln!("switchboard server failed: {err}");
            1
        }
    };
    std::process::exit(code);
}

/// Stops the server on EOF or a `shutdown` line on stdin; `shutdown
/// REASON` gives the clients that reason (`LocalServer::shutdown_with`).
/// `stop` is called once, with the reason if there is one. A `tag KEY=VALUE`
/// line (`ListingTagger::tag`) is given to `tag`.
pub(crate) fn watch_parent(
    stop: impl FnOnce(Option<String>) + Send + 'static,
    tag: impl Fn(&str, &str) + Send + 'static,
) {
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut reason = None;
        for line in stdin.lock().lines() {
            match line {
                Ok(line) if line.trim() == "shutdown" => break,
                Ok(line) => {
                    if let Some(given) = line.strip_prefix("shutdown ") {
                        reason = Some(given.trim().chars().take(MAX_REASON_CHARS).collect());
                        break;
                    }
                    if let Some((key, value)) =
                        line.strip_prefix("tag ").and_then(|t| t.split_once('='))
                    {
                        tag(key.trim(), value.trim());
                    }
                }
                Err(_) => break,
            }
        }
        // Stop before logging: when the parent died, stderr has no reader
        // any more and nothing that writes to it may stand in the way.
        stop(reason);
        tracing::info!("stdin closed or shutdown asked: stopping");
    });
}

/// The longest reason a parent's `shutdown REASON` line passes on.
const MAX_REASON_CHARS: usize = 200;

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
impl std::io::Write for Stderr {
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
