//! [`LocalServer`]: the game's server as a child process.
//!
//! The parent starts a program (the game's own executable, or a named server
//! binary such as `switchboard-server`) with `SWITCHBOARD_CHILD=1` and the bind
//! scope and port in its environment. The child, in [`serve_if_child`], binds,
//! prints one ready line on stdout, and serves until its stdin reaches EOF
//! (the parent asked it to stop, or died, even by SIGKILL), a `shutdown` line
//! arrives on stdin, or it gets SIGTERM / Ctrl-C. Its log lines go to stderr,
//! which the parent forwards into its own `tracing`.
//!
//! ```text
//! parent                                   child
//!   spawn(env SWITCHBOARD_CHILD=1) ───────▶ bind
//!   read stdout   ◀── "SWITCHBOARD READY <protocol> <port>"
//!   ...play...
//!   "shutdown\n", close stdin ───────────▶ graceful shutdown, exit 0
//!   wait (kill after shutdown_timeout)
//! ```

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::manager::{GameLogic, ManagerConfig, ServerManager};
use crate::master::Announce;
use crate::socket::BindScope;
use crate::PROTOCOL_VERSION;

/// Set in the child's environment: "you are a Switchboard server".
pub const ENV_CHILD: &str = "SWITCHBOARD_CHILD";
/// `loopback` or `all`.
pub const ENV_BIND: &str = "SWITCHBOARD_BIND";
/// The port to bind, 0 for any.
pub const ENV_PORT: &str = "SWITCHBOARD_PORT";
/// The join password, if any.
pub const ENV_PASSWORD: &str = "SWITCHBOARD_PASSWORD";
/// What to announce to master servers: hex of the bincode of
/// `(masters, info, heartbeat seconds)`.
pub const ENV_ANNOUNCE: &str = "SWITCHBOARD_ANNOUNCE";
/// The first word of the ready line.
pub const READY_PREFIX: &str = "SWITCHBOARD READY";

/// Lines of the child's stderr kept to explain a failed start.
const STDERR_TAIL: usize = 40;

/// Which program runs the server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerProgram {
    /// The running executable itself, re-invoked; its `main` must call
    /// [`serve_if_child`] first.
    CurrentExe,
    /// Another program, such as `switchboard-server`.
    Path(PathBuf),
}

/// How to start a [`LocalServer`].
#[derive(Debug, Clone, PartialEq)]
pub struct LocalServerOptions {
    /// The program (default: the current executable).
    pub program: ServerProgram,
    /// Extra arguments for it.
    pub args: Vec<String>,
    /// Loopback for single player (default), every interface for hosting.
    pub scope: BindScope,
    /// The port; 0 (default) picks a free one.
    pub port: u16,
    /// A join password for a hosted game.
    pub password: Option<String>,
    /// How long the child may take to report ready (default 15 s).
    pub ready_timeout: Duration,
    /// How long a shutdown may take before the child is killed (default 5 s).
    pub shutdown_timeout: Duration,
    /// Register the server with master servers (a hosted game others can
    /// find). None (default): not listed.
    pub announce: Option<Announce>,
}

impl Default for LocalServerOptions {
    fn default() -> Self {
        Self {
            program: ServerProgram::CurrentExe,
            args: Vec::new(),
            scope: BindScope::Loopback,
            port: 0,
            password: None,
            ready_timeout: Duration::from_secs(15),
            shutdown_timeout: Duration::from_secs(5),
            announce: None,
        }
    }
}

/// Why a local server did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The program could not be started.
    #[error("cannot start the server program: {0}")]
    Start(#[from] std::io::Error),
    /// The child exited before it was ready.
    #[error("the server exited before it was ready ({status}); its stderr:\n{stderr}")]
    Exited {
        /// How it exited.
        status: ExitStatus,
        /// The last lines it wrote to stderr.
        stderr: String,
    },
    /// The child said nothing ready-like in time.
    #[error("the server was not ready within {timeout:?}; its stderr:\n{stderr}")]
    Timeout {
        /// The configured timeout.
        timeout: Duration,
        /// The last lines it wrote to stderr.
        stderr: String,
    },
    /// The child speaks another protocol version.
    #[error("the server speaks protocol {theirs}, this program {ours}")]
    Version {
        /// Ours.
        ours: u16,
        /// The child's.
        theirs: u16,
    },
}

/// A server running as a child process. Dropping it shuts the server down
/// (and kills it if it does not stop in time): no orphan servers.
#[derive(Debug)]
pub struct LocalServer {
    child: Child,
    stdin: Option<ChildStdin>,
    addr: SocketAddr,
    shutdown_timeout: Duration,
}

impl LocalServer {
    /// Starts the server and returns once it reports ready.
    pub fn spawn(options: LocalServerOptions) -> Result<Self, SpawnError> {
        let program = match &options.program {
            ServerProgram::CurrentExe => std::env::current_exe()?,
            ServerProgram::Path(path) => path.clone(),
        };
        let mut command = Command::new(program);
        command
            .args(&options.args)
            .env(ENV_CHILD, "1")
            .env(ENV_BIND, scope_name(options.scope))
            .env(ENV_PORT, options.port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match &options.password {
            Some(password) => command.env(ENV_PASSWORD, password),
            None => command.env_remove(ENV_PASSWORD),
        };
        match &options.announce {
            Some(announce) => command.env(ENV_ANNOUNCE, encode_announce(announce)),
            None => command.env_remove(ENV_ANNOUNCE),
        };
        let mut child = command.spawn()?;
        let stdin = child.stdin.take();
        let stderr_tail = forward_stderr(child.stderr.take().expect("piped stderr"), child.id());
        let ready = watch_stdout(child.stdout.take().expect("piped stdout"), child.id());

        let deadline = Instant::now() + options.ready_timeout;
        let tail = || {
            stderr_tail
                .lock()
                .map(|t| Vec::from(t.clone()).join("\n"))
                .unwrap_or_default()
        };
        let port = loop {
            match ready.recv_timeout(Duration::from_millis(50)) {
                Ok(Ok(port)) => break port,
                Ok(Err(theirs)) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(SpawnError::Version {
                        ours: PROTOCOL_VERSION,
                        theirs,
                    });
                }
                Err(mpsc::RecvTimeoutError::Timeout)
                | Err(mpsc::RecvTimeoutError::Disconnected) => {}
            }
            if let Some(status) = child.try_wait()? {
                // Give the stderr thread a moment to collect the last words.
                std::thread::sleep(Duration::from_millis(50));
                return Err(SpawnError::Exited {
                    status,
                    stderr: tail(),
                });
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SpawnError::Timeout {
                    timeout: options.ready_timeout,
                    stderr: tail(),
                });
            }
        };
        let ip = match options.scope {
            BindScope::AllInterfaces | BindScope::Loopback => IpAddr::V4(Ipv4Addr::LOCALHOST),
        };
        tracing::info!(pid = child.id(), port, "local server ready");
        Ok(Self {
            child,
            stdin,
            addr: SocketAddr::new(ip, port),
            shutdown_timeout: options.shutdown_timeout,
        })
    }

    /// Where to connect to it from this machine.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the child is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Asks the server to stop, waits for it, and kills it after the
    /// shutdown timeout. Returns how it exited.
    pub fn shutdown(mut self) -> std::io::Result<ExitStatus> {
        self.stop()
    }

    fn stop(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"shutdown\n");
            // Dropping stdin closes the pipe: EOF is the stop signal too.
        }
        let deadline = Instant::now() + self.shutdown_timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    pid = self.child.id(),
                    "local server did not stop in time; killing it"
                );
                self.child.kill()?;
                return self.child.wait();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        if let Err(err) = self.stop() {
            tracing::warn!(%err, "stopping the local server failed");
        }
    }
}

fn scope_name(scope: BindScope) -> &'static str {
    match scope {
        BindScope::AllInterfaces => "all",
        BindScope::Loopback => "loopback",
    }
}

fn encode_announce(announce: &Announce) -> String {
    let value = (
        &announce.masters,
        &announce.info,
        announce.heartbeat_interval.as_secs_f64(),
    );
    let bytes = crate::codec::encode_value(&value).expect("announce settings always encode");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_announce(hex: &str) -> Option<Announce> {
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect();
    let (masters, info, secs): (Vec<SocketAddr>, crate::master::ServerInfo, f64) =
        crate::codec::decode_value(&bytes?).ok()?;
    let mut announce = Announce::new(masters, info);
    announce.heartbeat_interval = Duration::from_secs_f64(secs.clamp(0.05, 86_400.0));
    Some(announce)
}

/// Forwards the child's stderr into `tracing` and keeps its last lines.
fn forward_stderr(stderr: std::process::ChildStderr, pid: u32) -> Arc<Mutex<VecDeque<String>>> {
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let keep = tail.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            tracing::info!(target: "switchboard::child", pid, "{}", line.escape_debug());
            if let Ok(mut tail) = keep.lock() {
                if tail.len() == STDERR_TAIL {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
    });
    tail
}

/// Reads the child's stdout: reports the ready line's port (or the other
/// protocol version), and forwards every other line into `tracing`.
fn watch_stdout(stdout: std::process::ChildStdout, pid: u32) -> mpsc::Receiver<Result<u16, u16>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            match parse_ready(&line) {
                Some(ready) => {
                    let _ = tx.send(ready);
                }
                None => {
                    tracing::info!(target: "switchboard::child", pid, "{}", line.escape_debug())
                }
            }
        }
    });
    rx
}

/// `SWITCHBOARD READY <protocol> <port>` → Ok(port), or Err(their protocol).
/// The ready line may follow other output that did not end its line.
fn parse_ready(line: &str) -> Option<Result<u16, u16>> {
    let at = line.find(READY_PREFIX)?;
    let rest = &line[at + READY_PREFIX.len()..];
    let mut words = rest.split_whitespace();
    let protocol: u16 = words.next()?.parse().ok()?;
    let port: u16 = words.next()?.parse().ok()?;
    Some(if protocol == PROTOCOL_VERSION {
        Ok(port)
    } else {
        Err(protocol)
    })
}

/// The line a server prints once it listens on `port`.
pub fn ready_line(port: u16) -> String {
    format!("{READY_PREFIX} {PROTOCOL_VERSION} {port}")
}

/// Call first thing in `main`: if this process was started by
/// [`LocalServer::spawn`], it becomes the server (built with `make_logic`)
/// and exits when told to; otherwise this returns at once.
///
/// ```no_run
/// // First line of the game's `main`:
/// switchboard::process::serve_if_child(switchboard::board::BoardLogic::default);
/// // ... the game itself ...
/// ```
pub fn serve_if_child<L: GameLogic>(make_logic: impl FnOnce() -> L) {
    if std::env::var_os(ENV_CHILD).is_none() {
        return;
    }
    let scope = match std::env::var(ENV_BIND).as_deref() {
        Ok("all") => BindScope::AllInterfaces,
        _ => BindScope::Loopback,
    };
    let port = std::env::var(ENV_PORT)
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let config = ManagerConfig {
        password: std::env::var(ENV_PASSWORD).ok().filter(|p| !p.is_empty()),
        announce: std::env::var(ENV_ANNOUNCE)
            .ok()
            .and_then(|hex| decode_announce(&hex)),
        ..ManagerConfig::default()
    };
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
/// the ready line on stdout once it listens. Logs go to stderr.
pub fn run_server<L: GameLogic>(
    scope: BindScope,
    port: u16,
    config: ManagerConfig,
    logic: L,
    watch_stdin: bool,
) -> std::io::Result<()> {
    init_stderr_logging();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("switchboard-server")
        .enable_all()
        .build()?;
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
        let signals = stop.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            signals.cancel();
        });
        manager.run(stop.cancelled_owned()).await;
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
struct Stderr;

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

/// Logs to stderr (what a parent forwards), once per process; `SWITCHBOARD_LOG`
/// filters (default `info`).
pub fn init_stderr_logging() {
    let _ = tracing_subscriber::fmt()
        .with_writer(|| Stderr)
        .with_ansi(false)
        .with_target(false)
        // The parent stamps each forwarded line with its own time.
        .without_time()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SWITCHBOARD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announce_settings_cross_the_environment() {
        let mut announce = Announce::new(
            vec!["127.0.0.1:27900".parse().unwrap()],
            crate::master::ServerInfo {
                name: "hosted".into(),
                region: "eu".into(),
                ..Default::default()
            },
        );
        announce.heartbeat_interval = Duration::from_millis(500);
        assert_eq!(decode_announce(&encode_announce(&announce)), Some(announce));
        assert_eq!(decode_announce("zz"), None);
    }

    #[test]
    fn ready_line_round_trips() {
        assert_eq!(parse_ready(&ready_line(4242)), Some(Ok(4242)));
        assert_eq!(parse_ready("SWITCHBOARD READY 99 1"), Some(Err(99)));
        assert_eq!(parse_ready("hello"), None);
        assert_eq!(parse_ready("SWITCHBOARD READY x 1"), None);
        assert_eq!(
            parse_ready("loading... SWITCHBOARD READY 1 80"),
            Some(Ok(80))
        );
    }
}
