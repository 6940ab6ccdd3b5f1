//! The full-screen game as a player sees it: the `strategy` binary runs in
//! a tmux pane (a real terminal), keys are sent to it, and the pane is read
//! back. Needs `tmux` (`scripts/install-test-deps` installs it).

use crate::process::Reaped;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::scratch;
use scratch::Scratch;

const BIN: &str = env!("CARGO_BIN_EXE_strategy");
const WAIT: Duration = Duration::from_secs(15);

/// A tmux server of the test's own with one 120×40 pane running `command`;
/// the pane stays after the command ends, showing `EXIT=<code>`.
struct Pane {
    socket: String,
}

impl Pane {
    fn run(tag: &str, command: &str) -> Pane {
        let pane = Pane {
            socket: format!("strategy-{tag}-{}", std::process::id()),
        };
        let shell = format!("{command}; echo EXIT=$?; sleep 600");
        pane.tmux(&[
            "new-session",
            "-d",
            "-s",
            "game",
            "-x",
            "120",
            "-y",
            "40",
            &shell,
        ]);
        pane
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux runs (scripts/install-test-deps installs it)");
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What the pane shows now.
    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "game"])
    }

    /// The status line (the screen's first line).
    fn status(&self) -> String {
        self.screen().lines().next().unwrap_or("").to_string()
    }

    fn keys(&self, keys: &str) {
        self.tmux(&["send-keys", "-t", "game", keys]);
    }

    /// Waits until `test` holds for the screen; returns that screen.
    fn until(&self, what: &str, test: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if test(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {what}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn shows(&self, text: &str) -> String {
        self.until(text, |screen| screen.contains(text))
    }

    /// The processes under the pane's shell.
    fn processes(&self) -> Vec<(u32, String)> {
        let shell: u32 = self
            .tmux(&["display", "-p", "-t", "game", "#{pane_pid}"])
            .trim()
            .parse()
            .expect("a pane pid");
        descendants(shell)
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// Every process below `root`, with its command line.
fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces, so after ')'.
        let after = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
        if let Some(ppid) = after
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok())
        {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            parents.push((pid, ppid, cmdline));
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, ppid, cmdline) in &parents {
            if *ppid == parent {
                found.push((*pid, cmdline.clone()));
                frontier.push(*pid);
            }
        }
    }
    found
}

fn kill(pid: u32) {
    let status = Command::new("kill").args(["-9", &pid.to_string()]).status();
    assert!(status.is_ok_and(|s| s.success()), "kill -9 {pid}");
}

fn saves(tag: &str) -> Scratch {
    Scratch::new(&format!("screen-{tag}"))
}

/// The port in "127.0.0.1:PORT" after `prefix` on the screen.
fn port_after(screen: &str, prefix: &str) -> u16 {
    let at = screen.find(prefix).expect("the prefix is on the screen") + prefix.len();
    screen[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("a port after {prefix:?}:\n{screen}"))
}

/// A dedicated server on `port` (0: any); returns it and its port.
fn dedicated(saves: &std::path::Path, port: u16) -> (Reaped, u16) {
    let mut child = Command::new(BIN)
        .args(["--serve", "--port", &port.to_string(), "--saves"])
        .arg(saves)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let server = Reaped(child);
    for line in stdout.lines().map_while(Result::ok) {
        if line.contains("--join 127.0.0.1:") {
            return (server, port_after(&line, "--join 127.0.0.1:"));
        }
    }
    panic!("the dedicated server never said where to join");
}

#[test]
fn the_lobby_shows_where_to_join_and_everyone_connected_and_a_guest_hears_why_the_game_ended() {
    let saves = saves("lobby");
    let host = Pane::run(
        "lobby",
        &format!("{BIN} --host --name ada --saves {}", saves.display()),
    );
    let screen = host.shows("others join at 127.0.0.1:");
    let port = port_after(&screen, "others join at 127.0.0.1:");
    assert!(screen.contains("here: ada (no nation yet)"), "{screen}");
    assert!(host
        .status()
        .contains(&format!("connected to 127.0.0.1:{port}")));

    // A guest that joined but picked no nation is listed; then its pick.
    let mut bob = Reaped(
        Command::new(BIN)
            .args(["--join", &format!("127.0.0.1:{port}"), "--name", "bob"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    host.shows("bob (no nation yet)");
    let mut typed = bob.0.stdin.take().unwrap();
    writeln!(typed, "pick 1").unwrap();
    let screen = host.shows("1 Blue: bob");
    assert!(screen.contains("bob (Blue)"), "{screen}");

    // The host quits: the guest is told why the game ended, not just
    // that its connection is gone.
    host.keys("q");
    host.shows("EXIT=0");
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = bob.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the guest never left");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut bob.0.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("the game's server closed it (the host, ada, quit)"),
        "{stderr}"
    );
}

#[test]
fn killing_the_local_server_during_play_is_on_the_status_line_at_once() {
    let saves = saves("local");
    let game = Pane::run(
        "local",
        &format!("{BIN} --name ada --saves {}", saves.display()),
    );
    let screen = game.shows("ada plays Red");
    assert!(screen.contains("moves to enter:"), "a legend: {screen}");
    assert!(screen.contains("owner: nobody"), "{screen}");
    game.keys("h"); // the cursor to (0, 3), Red's
    game.shows("owner: Red");
    let server = game
        .processes()
        .into_iter()
        .find(|(_, cmdline)| cmdline.contains("--scenario"))
        .expect("the local server runs under the game");
    kill(server.0);
    let killed = Instant::now();
    let status = game.until("that the local server stopped", |screen| {
        screen.lines().next().unwrap_or("").contains("disconnected")
    });
    assert!(
        killed.elapsed() < Duration::from_secs(3),
        "told after {:?}",
        killed.elapsed()
    );
    let first = status.lines().next().unwrap();
    assert!(
        first.contains(&format!("the local server (pid {}) stopped", server.0))
            && first.contains("SIGKILL"),
        "{status}"
    );
    // The screen stays until the player has read it; quitting says why.
    game.keys("q");
    let screen = game.shows("EXIT=1");
    assert!(screen.contains("the local server"), "{screen}");
}

#[test]
fn a_lost_server_shows_the_reconnect_countdown_then_why_it_could_not_come_back() {
    let saves = saves("remote");
    let (server, port) = dedicated(&saves, 0);
    let game = Pane::run(
        "remote",
        &format!("{BIN} --join 127.0.0.1:{port} --name ada"),
    );
    game.shows(&format!("connected to 127.0.0.1:{port}"));
    let lobby = game.shows("here: ada");
    assert!(
        !lobby.contains("others join"),
        "only a host invites: {lobby}"
    );
    let mut server = server;
    kill(server.0.id());
    let _ = server.0.wait();
    let screen = game.until("the reconnect countdown", |screen| {
        let status = screen.lines().next().unwrap_or("");
        status.contains("connection lost") && status.contains("attempt") && status.contains(" s")
    });
    assert!(screen.contains("of 120 in"), "{screen}");
    // A server on the same port again: the client comes back to it, and
    // is told plainly that this server never knew its session (it keeps
    // none across a restart without Redis: docs/SCALING.md).
    let _again = dedicated(&saves, port);
    let screen = game.until("the refusal", |screen| {
        screen.lines().next().unwrap_or("").contains("disconnected")
    });
    assert!(screen.contains("did not know your session"), "{screen}");
}
