//! What the process tests share: the server binary as a child process,
//! killed (SIGKILL) when dropped, waiting for a condition, a board
//! request answered, and an HTTP request to an admin server.

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_switchboard-server");

/// A child process that is killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `switchboard-server ARGS` and returns it with the port of its
/// ready line.
pub fn start(args: &[&str]) -> (Proc, u16) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (child, lines) = start_lines(&args);
    (Proc(child), ready_port(&lines))
}

/// Starts `switchboard-server ARGS` (which ask for an admin port) and
/// returns it with the port of its ready line and its admin address.
pub fn start_with_admin(args: &[&std::ffi::OsStr]) -> (Proc, u16, String) {
    let (child, lines) = start_lines(args);
    let (mut port, mut admin) = (None, None);
    while admin.is_none() {
        let line = lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the server's lines");
        if let Some(p) = line.strip_prefix("SWITCHBOARD READY 1 ") {
            port = p.trim().parse::<u16>().ok();
        }
        if let Some(rest) = line.strip_prefix("admin: http://") {
            admin = rest.strip_suffix('/').map(str::to_string);
        }
    }
    (Proc(child), port.expect("a ready line"), admin.unwrap())
}

/// Polls `done` every 10 ms for up to `wait`; panics naming `what`.
pub fn wait_until(what: &str, wait: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + wait;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not in time");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends a board request and polls `client` until its verdict (for up to
/// `wait`).
pub fn ask(
    client: &mut switchboard::NetworkClient,
    request: switchboard_server::board::Board,
    wait: Duration,
) -> switchboard::RequestStatus {
    let ticket = client.request(request).unwrap();
    wait_until("verdict", wait, || {
        client.poll();
        client.status(ticket).is_done()
    });
    client.status(ticket)
}

/// One HTTP/1.1 request on a fresh connection to an admin server: the
/// response's status and body bytes.
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, Vec<u8>) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let status = String::from_utf8_lossy(&response[9..12]).parse().unwrap();
    (status, response[split + 4..].to_vec())
}

/// Starts `switchboard-server ARGS`; its stdout lines arrive on the
/// receiver (for tests that read more than the ready line).
pub fn start_lines(
    args: &[impl AsRef<std::ffi::OsStr>],
) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut command = Command::new(BIN);
    command.args(args);
    lines_of(command)
}

/// Starts `command` (the server binary run some other way: in a network
/// namespace, say) and returns it with the port of its ready line.
pub fn start_command(command: Command) -> (Proc, u16) {
    let (child, lines) = lines_of(command);
    (Proc(child), ready_port(&lines))
}

/// Starts `command`, a server bound beyond loopback, and returns it with
/// the port of its ready line and the TLS fingerprint it printed before.
pub fn start_command_tls(command: Command) -> (Proc, u16, switchboard::tls::Fingerprint) {
    let (child, lines) = lines_of(command);
    let child = Proc(child);
    let fingerprint = line_starting(&lines, "tls: sha256 ")["tls: sha256 ".len()..]
        .trim()
        .parse()
        .unwrap();
    (child, ready_port(&lines), fingerprint)
}

/// Starts `command` with its stdout read line by line.
fn lines_of(mut command: Command) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (lines, received) = std::sync::mpsc::channel();
    // Reads to the end even once nobody listens: a closed pipe would kill
    // a server at its next line (`println!` panics on EPIPE).
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    (child, received)
}

/// The first line that starts with `prefix`, within 10 s.
pub fn line_starting(lines: &std::sync::mpsc::Receiver<String>, prefix: &str) -> String {
    loop {
        match lines.recv_timeout(Duration::from_secs(10)) {
            Ok(line) if line.starts_with(prefix) => return line,
            Ok(_) => {}
            Err(e) => panic!("no line starting {prefix:?}: {e}"),
        }
    }
}

/// The port of the ready line among `lines`.
pub fn ready_port(lines: &std::sync::mpsc::Receiver<String>) -> u16 {
    line_starting(lines, "SWITCHBOARD READY 1 ")["SWITCHBOARD READY 1 ".len()..]
        .trim()
        .parse()
        .unwrap()
}

/// Sends `signal` to a child (SIGINT: Ctrl-C; SIGTERM).
pub fn signal(child: &Child, signal: libc::c_int) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
}
