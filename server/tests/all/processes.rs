//! Real processes: the `switchboard-server` binary as a spawned child, as a
//! separately started remote server, killed, and outliving a killed parent.

use std::cell::RefCell;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use switchboard::process::{LocalServer, LocalServerOptions, ServerProgram, SpawnError};
use switchboard::socket::BindScope;
use switchboard::{ClientConfig, NetworkClient, ReconnectPolicy, RequestStatus};
use switchboard_server::board::{Board, BoardChannel, Presence};

use crate::support;

const WAIT: Duration = Duration::from_secs(10);

fn server_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_switchboard-server"))
}

fn options(scope: BindScope) -> LocalServerOptions {
    LocalServerOptions {
        program: ServerProgram::Path(server_binary()),
        scope,
        ..LocalServerOptions::default()
    }
}

/// Whether a process is alive (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// The server binary started by hand with `args`, and the port its ready
/// line gives.
fn started_by_hand(args: &[&str]) -> (std::process::Child, u16) {
    let mut child = Command::new(server_binary())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let port: u16 = line
        .strip_prefix("SWITCHBOARD READY 1 ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("ready line, got {line:?}"));
    (child, port)
}

fn wait_until(what: &str, done: impl FnMut() -> bool) {
    support::wait_until(what, WAIT, done)
}

fn welcomed(addr: impl ToString, name: &str) -> NetworkClient {
    let mut client = NetworkClient::connect(addr, ClientConfig::named(name));
    wait_until("welcome", || {
        client.poll();
        client.is_welcomed()
    });
    client
}

fn ask(client: &mut NetworkClient, request: Board) -> RequestStatus {
    support::ask(client, request, WAIT)
}

#[test]
fn single_player_spawns_plays_quits_and_leaves_no_process() {
    let server = LocalServer::spawn(options(BindScope::Loopback)).unwrap();
    let pid = server.pid();
    assert!(alive(pid));
    assert!(server.addr().ip().is_loopback());
    let mut client = welcomed(server.addr(), "solo");
    assert_eq!(ask(&mut client, Board::Claim(0u8)), RequestStatus::Accepted);
    assert_eq!(
        ask(&mut client, Board::Claim(200u8)),
        RequestStatus::Rejected("seats are 0 to 7".into())
    );
    let status = server.shutdown().unwrap();
    assert!(status.success(), "clean exit, got {status}");
    assert!(!alive(pid), "no server process left behind");
}

#[test]
fn dropping_the_handle_stops_the_child_too() {
    let server = LocalServer::spawn(options(BindScope::Loopback)).unwrap();
    let pid = server.pid();
    drop(server);
    assert!(!alive(pid));
}

/// Whether something listens on 0.0.0.0:`port` (per /proc/net/tcp).
fn listens_on_every_interface(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let wanted = format!("00000000:{port:04X}");
    table.lines().skip(1).any(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        cols.len() > 3 && cols[1] == wanted && cols[3] == "0A"
    })
}

#[test]
fn hosting_binds_every_interface_and_two_players_join() {
    let server = LocalServer::spawn(options(BindScope::AllInterfaces)).unwrap();
    assert!(
        listens_on_every_interface(server.port()),
        "bound to 0.0.0.0:{}",
        server.port()
    );
    let mut host = welcomed(server.addr(), "host");
    let seen = Rc::new(RefCell::new(Vec::<Presence>::new()));
    let sink = seen.clone();
    host.subscribe(BoardChannel::Board, move |d| {
        if let Ok(Board::Presence(presence)) = d.typed() {
            sink.borrow_mut().push(presence);
        }
    });
    let _ann = welcomed(server.addr(), "ann");
    let _bob = welcomed(server.addr(), "bob");
    wait_until("both joins seen by the host", || {
        host.poll();
        seen.borrow().len() == 2
    });
    let names: Vec<String> = seen.borrow().iter().map(|p| p.name.clone()).collect();
    assert_eq!(names, ["ann", "bob"]);
    assert!(server.shutdown().unwrap().success());
}

#[test]
fn remote_client_plays_on_a_separately_started_server_which_stops_on_sigterm() {
    let (mut child, port) = started_by_hand(&["--port", "0", "--bind", "loopback"]);
    let mut client = welcomed(format!("localhost:{port}"), "remote");
    assert_eq!(
        ask(&mut client, Board::Say("hi from afar".into())),
        RequestStatus::Accepted
    );

    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "server did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "clean shutdown on SIGTERM, got {status}");
    // The client was told why.
    let reason = Rc::new(RefCell::new(None));
    let r = reason.clone();
    client
        .signals()
        .disconnected
        .connect(move |why| *r.borrow_mut() = Some(why.to_string()));
    wait_until("client told", || {
        client.poll();
        reason.borrow().is_some()
    });
    assert!(reason
        .borrow()
        .as_ref()
        .unwrap()
        .contains("server shutting down"));
}

#[test]
fn killed_server_is_noticed_and_a_restarted_one_refuses_the_lost_session() {
    let server = LocalServer::spawn(options(BindScope::Loopback)).unwrap();
    let port = server.port();
    let config = ClientConfig {
        reconnect: ReconnectPolicy {
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
            max_attempts: 50,
            ..ReconnectPolicy::default()
        },
        ..ClientConfig::named("ann")
    };
    let mut client = NetworkClient::connect(server.addr(), config);
    wait_until("welcome", || {
        client.poll();
        client.is_welcomed()
    });
    let lost = Rc::new(RefCell::new(0));
    let refused = Rc::new(RefCell::new(None));
    let (l, r) = (lost.clone(), refused.clone());
    client
        .signals()
        .connection_lost
        .connect(move |_| *l.borrow_mut() += 1);
    client
        .signals()
        .refused
        .connect(move |why| *r.borrow_mut() = Some(why.clone()));

    Command::new("kill")
        .args(["-KILL", &server.pid().to_string()])
        .status()
        .unwrap();
    wait_until("connection loss noticed", || {
        client.poll();
        *lost.borrow() == 1
    });
    drop(server);

    // A new server on the same port knows nothing of the old session.
    let restarted = LocalServer::spawn(LocalServerOptions {
        port,
        ..options(BindScope::Loopback)
    })
    .unwrap();
    wait_until("refusal", || {
        client.poll();
        refused.borrow().is_some()
    });
    let refusal = refused.borrow().clone().unwrap();
    assert_eq!(
        (refusal.code, refusal.reason.as_str()),
        (1, "unknown session")
    );
    wait_until("client gives up", || {
        client.poll();
        client.is_finished()
    });
    drop(restarted);
}

/// Not a test of its own: the parent process for
/// `child_exits_when_its_parent_is_killed`, run as a separate process.
#[test]
#[ignore = "helper process for child_exits_when_its_parent_is_killed"]
fn helper_parent_process() {
    if std::env::var_os("SWITCHBOARD_TEST_PARENT").is_none() {
        return;
    }
    let server = LocalServer::spawn(options(BindScope::Loopback)).unwrap();
    println!("CHILD_PID {}", server.pid());
    std::thread::sleep(Duration::from_secs(120));
    drop(server);
}

#[test]
fn child_exits_when_its_parent_is_killed() {
    let mut parent = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "processes::helper_parent_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SWITCHBOARD_TEST_PARENT", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(parent.stdout.take().unwrap());
    let child_pid: u32 = stdout
        .lines()
        .map_while(Result::ok)
        // libtest may print "test helper_parent_process ... " on the same line.
        .find_map(|line| {
            let at = line.find("CHILD_PID ")?;
            line[at + "CHILD_PID ".len()..].trim().parse().ok()
        })
        .expect("the helper reported its child");
    assert!(alive(child_pid));
    Command::new("kill")
        .args(["-KILL", &parent.id().to_string()])
        .status()
        .unwrap();
    parent.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(child_pid) {
        assert!(
            Instant::now() < deadline,
            "the orphaned server {child_pid} is still running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn child_that_exits_early_is_an_error_with_its_stderr() {
    let options = LocalServerOptions {
        program: ServerProgram::Path("/bin/sh".into()),
        args: vec![
            "-c".into(),
            "echo 'cannot load scenario' >&2; exit 3".into(),
        ],
        ..LocalServerOptions::default()
    };
    match LocalServer::spawn(options) {
        Err(SpawnError::Exited { status, stderr }) => {
            assert_eq!(status.code(), Some(3));
            assert!(stderr.contains("cannot load scenario"), "{stderr}");
        }
        other => panic!("expected Exited, got {other:?}"),
    }
}

#[test]
fn silent_child_is_a_timeout_and_is_killed() {
    let options = LocalServerOptions {
        program: ServerProgram::Path("/bin/sh".into()),
        args: vec!["-c".into(), "echo starting >&2; exec sleep 30".into()],
        ready_timeout: Duration::from_millis(500),
        ..LocalServerOptions::default()
    };
    match LocalServer::spawn(options) {
        Err(SpawnError::Timeout { stderr, .. }) => assert!(stderr.contains("starting"), "{stderr}"),
        other => panic!("expected Timeout, got {other:?}"),
    }
}

#[test]
fn password_from_a_file_admits_the_right_one_and_refuses_the_wrong() {
    let dir = std::env::temp_dir().join(format!("switchboard-pw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("password");
    std::fs::write(&file, "sesame\n").unwrap();
    let file_arg = file.to_str().unwrap();
    let (mut child, port) = started_by_hand(&[
        "--port",
        "0",
        "--bind",
        "loopback",
        "--password-file",
        file_arg,
    ]);
    let join = |password: &str| {
        let config = ClientConfig {
            password: Some(password.into()),
            ..ClientConfig::named("ann")
        };
        let mut client = NetworkClient::connect(format!("127.0.0.1:{port}"), config);
        wait_until("an answer", || {
            client.poll();
            client.is_welcomed() || client.is_finished()
        });
        client.is_welcomed()
    };
    assert!(
        join("sesame"),
        "the file's first line, without its line ending"
    );
    assert!(!join("sesame\n"));
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_board_server_asking_connect_tokens_admits_a_minted_one_once() {
    // The fleet's key, a server that asks tokens naming it, and a token
    // minted by the binary as a backend would.
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("fleet.key");
    std::fs::write(&key, "2a".repeat(32)).unwrap();
    let key = key.to_str().unwrap();
    let (_board, port) = support::start(&[
        "--port",
        "0",
        "--connect-token-key-file",
        key,
        "--connect-token-name",
        "board-1:7000",
    ]);
    let mint = |server: &str| {
        let out = Command::new(support::BIN)
            .args(["mint-token", "--key-file", key, "--server", server])
            .args(["--client-id", "7", "--secs", "60"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let hex = String::from_utf8(out.stdout).unwrap();
        (0..hex.trim().len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex.trim()[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    // The outcome of a join with `credentials`: welcomed, or the reason.
    let join = |credentials: Vec<u8>| {
        let config = ClientConfig {
            credentials,
            reconnect: ReconnectPolicy {
                max_attempts: 0,
                ..ReconnectPolicy::default()
            },
            ..ClientConfig::named("ann")
        };
        let mut client = NetworkClient::connect(format!("127.0.0.1:{port}"), config);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(Instant::now() < deadline, "no verdict on the join");
            for event in client
                .drain_timeout(Duration::from_millis(20))
                .collect::<Vec<_>>()
            {
                match event {
                    switchboard::ClientEvent::Welcomed(_) => return Ok(client),
                    switchboard::ClientEvent::Refused(why) => return Err(why.to_string()),
                    _ => {}
                }
            }
        }
    };
    let token = mint("board-1:7000");
    let _ann = join(token.clone()).expect("the minted token joins");
    let again = join(token).expect_err("a token joins once");
    assert!(again.contains("used before"), "{again}");
    let elsewhere = join(mint("board-2:7000")).expect_err("for another server");
    assert!(elsewhere.contains("another server"), "{elsewhere}");
    let without = join(Vec::new()).expect_err("no token");
    assert!(without.contains("connect token refused"), "{without}");
}
