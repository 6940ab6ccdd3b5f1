//! The parent's side: start the server program, read its ready line, forward
//! its stderr, stop it (and kill it if it does not stop in time).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::{parse_ready, ENV_BIND, ENV_CHILD, ENV_PASSWORD, ENV_PORT};
use crate::socket::BindScope;
use crate::PROTOCOL_VERSION;

/// Lines of the child's stderr kept to explain a failed start.
const STDERR_TAIL: usize = 40;

/// Which program runs the server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerProgram {
    /// The running executable itself, re-invoked; its `main` must call
    /// [`serve_if_child`](super::serve_if_child) first.
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
    /// Extra environment variables for the child (what a listing crate
    /// passes to a hosted game's server, for instance).
    pub env: Vec<(String, String)>,
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
            env: Vec::new(),
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

/// Sets tags of a child server's listing: a `tag KEY=VALUE` line on its
/// stdin, read by the child's manager (`ManagerHandle::set_listing_tag`).
#[derive(Debug, Clone)]
pub struct ListingTagger(Arc<Mutex<Option<ChildStdin>>>);

impl ListingTagger {
    /// Sets `key=value` (neither with a line break or `=` in the key; the
    /// child's listing checks the lengths). An error once the child stopped.
    pub fn tag(&self, key: &str, value: &str) -> std::io::Result<()> {
        if key.contains(['=', '\r', '\n']) || value.contains(['\r', '\n']) {
            return Err(std::io::Error::other(
                "a tag is one line, its key without '='",
            ));
        }
        let mut stdin = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let stdin = stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the server has stopped"))?;
        stdin.write_all(format!("tag {key}={value}\n").as_bytes())?;
        stdin.flush()
    }
}

/// A server running as a child process. Dropping it shuts the server down
/// (and kills it if it does not stop in time): no orphan servers.
#[derive(Debug)]
pub struct LocalServer {
    child: Child,
    /// Shared with the [`ListingTagger`]s; taken (closed) at shutdown.
    stdin: Arc<Mutex<Option<ChildStdin>>>,
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
        command.envs(options.env.iter().map(|(k, v)| (k, v)));
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
            stdin: Arc::new(Mutex::new(stdin)),
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

    /// How the child ended, once it has (`None` while it runs): a game
    /// tells its player why its server is gone ("killed by signal 9")
    /// instead of waiting for reconnects that cannot work.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Asks the server to stop, waits for it, and kills it after the
    /// shutdown timeout. Returns how it exited.
    pub fn shutdown(mut self) -> std::io::Result<ExitStatus> {
        self.stop(None)
    }

    /// A handle that sets tags of the child's listing on its masters (its
    /// `LocalServerOptions::env` carried an `Announce`): what the game
    /// learned after the server started, a join code say. `Send`, for any
    /// thread of the game.
    pub fn listing_tagger(&self) -> ListingTagger {
        ListingTagger(self.stdin.clone())
    }

    /// Like [`shutdown`](Self::shutdown), and the server tells its clients
    /// `reason` as it closes their connections ("the host, ada, quit")
    /// instead of "server shutting down". One line of at most 200
    /// characters.
    pub fn shutdown_with(mut self, reason: &str) -> std::io::Result<ExitStatus> {
        self.stop(Some(reason))
    }

    fn stop(&mut self, reason: Option<&str>) -> std::io::Result<ExitStatus> {
        let stdin = self.stdin.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut stdin) = stdin {
            let line = match reason {
                Some(reason) => format!("shutdown {}\n", reason.replace(['\r', '\n'], " ")),
                None => "shutdown\n".to_string(),
            };
            let _ = stdin.write_all(line.as_bytes());
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
        if let Err(err) = self.stop(None) {
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

/// The longest line kept of the child's output (bytes); the rest of a
/// longer line is skipped, so a child cannot make its parent buffer without
/// bound.
const MAX_LINE: usize = 2048;

/// Lines of a child's output, each cut at [`MAX_LINE`] bytes (and read as
/// UTF-8 with replacement); ends at EOF or an error.
struct CappedLines<R> {
    reader: BufReader<R>,
}

impl<R: std::io::Read> CappedLines<R> {
    fn new(inner: R) -> Self {
        Self {
            reader: BufReader::new(inner),
        }
    }
}

impl<R: std::io::Read> Iterator for CappedLines<R> {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        let mut line = Vec::new();
        loop {
            let available = self.reader.fill_buf().ok()?;
            if available.is_empty() {
                return (!line.is_empty()).then(|| String::from_utf8_lossy(&line).into_owned());
            }
            let (chunk, found) = match available.iter().position(|b| *b == b'\n') {
                Some(at) => (&available[..at], Some(at + 1)),
                None => (available, None),
            };
            let room = MAX_LINE.saturating_sub(line.len());
            line.extend_from_slice(&chunk[..chunk.len().min(room)]);
            let used = found.unwrap_or(available.len());
            self.reader.consume(used);
            if found.is_some() {
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Some(String::from_utf8_lossy(&line).into_owned());
            }
        }
    }
}

/// Forwards the child's stderr into `tracing` and keeps its last lines.
fn forward_stderr(stderr: std::process::ChildStderr, pid: u32) -> Arc<Mutex<VecDeque<String>>> {
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let keep = tail.clone();
    std::thread::spawn(move || {
        for line in CappedLines::new(stderr) {
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
        for line in CappedLines::new(stdout) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_s_endless_line_is_cut_and_the_next_lines_still_arrive() {
        let mut output = vec![b'x'; 10 * MAX_LINE];
        output.extend_from_slice(b"\nready\r\nlast");
        let lines: Vec<String> = CappedLines::new(&output[..]).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].len(), MAX_LINE);
        assert_eq!(&lines[1..], ["ready", "last"]);
    }
}
