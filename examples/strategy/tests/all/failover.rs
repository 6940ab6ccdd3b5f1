//! A named game outlives its server process: hosted on process A with its
//! sessions and checkpoints in a real Redis, played for two turns, A killed
//! with SIGKILL; process B resumes the game from its last completed turn,
//! lists itself under the game's name, and the players, following the
//! directory (the master's list), reconnect to B with their ids and nations
//! and play turn three.
//!
//! With test players speaking the protocol (also across a Redis restarted
//! empty before the kill), and with the game's own client binary driven on
//! its stdin. One server per game: a second one waits for the game's lease,
//! and a server for a game Redis does not know says so.

use std::cell::{Cell, RefCell};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use strategy::directory::Directory;
use strategy::protocol::{Chan, GameAct, LobbyAct, Move, Msg, NationView};
use strategy::rules::StrategyLogic;
use strategy::scenario::NationId;
use switchboard::{ClientConfig, ClientId, NetworkClient, ReconnectPolicy, RequestStatus};
use switchboard_master::{MasterServer, RunningMaster};
use switchboard_redis::testing::RedisProcess;
use switchboard_redis::RedisCheckpoints;

const WAIT: Duration = Duration::from_secs(20);
const BIN: &str = env!("CARGO_BIN_EXE_strategy");
const GAME: &str = "failover-test";

// A server process, killed with SIGKILL when dropped.
use crate::process::Reaped as Server;

/// The game's first server (`--new-game`).
fn serve_new(redis: &RedisProcess, master: &str, saves: &PathBuf) -> Server {
    serve_named(redis, master, saves, GAME, &["--new-game"])
}

/// A server that resumes the game (no `--new-game`).
fn serve(redis: &RedisProcess, master: &str, saves: &PathBuf) -> Server {
    serve_named(redis, master, saves, GAME, &[])
}

/// A player that finds the game through the directory and follows it.
struct Player {
    client: NetworkClient,
    view: Rc<RefCell<Option<NationView>>>,
    directory: Directory,
    reconnecting: Rc<Cell<bool>>,
}

impl Player {
    fn join(directory: &Directory, name: &str) -> Player {
        let addr = wait_for(|| directory.servers().ok()?.into_iter().next());
        let config = ClientConfig {
            reconnect: ReconnectPolicy {
                initial_delay: Duration::from_millis(50),
                max_delay: Duration::from_millis(300),
                ..ReconnectPolicy::default()
            },
            ..ClientConfig::named(name)
        };
        let client = NetworkClient::connect(addr, config);
        let view = Rc::new(RefCell::new(None));
        let sink = view.clone();
        client.subscribe(Chan::Game, move |d| {
            if let Ok(GameAct::View(view)) = d.typed() {
                *sink.borrow_mut() = Some(view);
            }
        });
        let reconnecting = Rc::new(Cell::new(false));
        let flag = reconnecting.clone();
        client
            .signals()
            .reconnecting
            .connect(move |_| flag.set(true));
        let mut player = Player {
            client,
            view,
            directory: directory.clone(),
            reconnecting,
        };
        player.until(|p| p.client.is_welcomed() && p.view.borrow().is_some());
        player
    }

    fn until(&mut self, mut done: impl FnMut(&Player) -> bool) {
        let deadline = Instant::now() + WAIT;
        while !done(self) {
            assert!(Instant::now() < deadline, "condition not reached in time");
            self.client.poll_timeout(Duration::from_millis(5));
            // What the game's client does: at each reconnect attempt, ask
            // the directory where the game is now.
            if self.reconnecting.replace(false) {
                if let Ok(servers) = self.directory.servers() {
                    self.client.redirect(servers);
                }
            }
        }
    }

    fn ask(&mut self, order: impl Into<Msg>) {
        let order = order.into();
        let what = format!("{order:?}");
        let ticket = self.client.request(order).unwrap();
        self.until(|p| p.client.status(ticket).is_done());
        assert_eq!(
            self.client.status(ticket),
            RequestStatus::Accepted,
            "{what}"
        );
    }

    fn view(&self) -> NationView {
        self.view.borrow().clone().unwrap()
    }

    fn until_turn(&mut self, turn: u32) {
        self.until(|p| p.view.borrow().as_ref().is_some_and(|v| v.turn == turn));
    }
}

fn wait_for<T>(mut found: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = found() {
            return value;
        }
        assert!(Instant::now() < deadline, "not found in time");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The turn of `game`'s checkpoint in Redis, if it has one.
fn checkpoint_turn(redis: &RedisProcess, game: &str) -> Option<u32> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let bytes = RedisCheckpoints::new(redis.store(), game)
            .ok()?
            .load()
            .await
            .ok()??;
        let logic = StrategyLogic::resume(&bytes, std::env::temp_dir()).ok()?;
        Some(logic.view(None).turn)
    })
}

/// Whether Redis holds `client`'s session.
fn session_stored(redis: &RedisProcess, client: ClientId) -> bool {
    let store = redis.store();
    let key = store.key(format_args!("session:{client}"));
    switchboard::runtime::handle()
        .block_on(store.run(|mut c| async move {
            redis::cmd("EXISTS")
                .arg(&key)
                .query_async::<u32>(&mut c)
                .await
        }))
        .is_ok_and(|n| n == 1)
}

/// What both tests need: a Redis, a master (the directory) and its
/// address, a saves folder named after `tag`.
fn service(tag: &str) -> (RedisProcess, RunningMaster, String, PathBuf) {
    let redis = RedisProcess::start().unwrap();
    let master = MasterServer::builder().spawn().unwrap();
    let master_addr = master.local_addr().to_string();
    let saves = std::env::temp_dir().join(format!("strategy-{tag}-{}", std::process::id()));
    (redis, master, master_addr, saves)
}

#[test]
fn a_game_resumes_on_another_process_after_a_sigkill_with_the_same_players_on_the_same_nations() {
    fail_over("failover", |_, _| {});
}

#[test]
fn a_game_survives_a_redis_restart_empty_then_a_sigkill_with_the_same_players_on_the_same_nations()
{
    fail_over("failover-redis-restart", |redis, ids| {
        // Everything Redis held is gone; the server writes its lease, its
        // checkpoint and its players' sessions again at once.
        let restarted = Instant::now();
        redis.restart().unwrap();
        wait_for(|| checkpoint_turn(redis, GAME).filter(|t| *t == 3));
        wait_for(|| {
            ids.iter()
                .all(|id| session_stored(redis, *id))
                .then_some(())
        });
        assert!(restarted.elapsed() < Duration::from_secs(3));
    });
}

/// Two players, two completed turns on server A; `before_kill` (with the
/// checkpoint of turn 3 in Redis); A killed with SIGKILL; B resumes the
/// game: the same players on the same nations, turn 1's move kept, turn 3
/// played on B.
fn fail_over(tag: &str, before_kill: impl FnOnce(&mut RedisProcess, &[ClientId])) {
    let (mut redis, master, master_addr, saves) = service(tag);
    let directory = Directory {
        masters: vec![master.local_addr()],
        game: GAME.into(),
    };

    let a = serve_new(&redis, &master_addr, &saves);
    let mut ann = Player::join(&directory, "ann");
    let mut bob = Player::join(&directory, "bob");
    ann.ask(LobbyAct::Pick(NationId(0)));
    bob.ask(LobbyAct::Pick(NationId(1)));
    ann.ask(LobbyAct::Ready(true));
    bob.ask(LobbyAct::Ready(true));
    ann.ask(LobbyAct::Start);
    ann.until(|p| {
        p.view
            .borrow()
            .as_ref()
            .is_some_and(|v| v.you == Some(NationId(0)))
    });
    let ids: Vec<Option<ClientId>> = vec![ann.client.client_id(), bob.client.client_id()];

    // Turn 1: Red's infantry steps east; then two completed turns.
    let infantry = ann.view().unit_at(1, 3).unwrap().id;
    let step = Move {
        unit: infantry,
        x: 2,
        y: 3,
    };
    ann.ask(GameAct::Move(step));
    for turn in [1, 2] {
        ann.ask(GameAct::EndTurn);
        bob.ask(GameAct::EndTurn);
        ann.until_turn(turn + 1);
        bob.until_turn(turn + 1);
    }
    wait_for(|| checkpoint_turn(&redis, GAME).filter(|t| *t == 3));
    let known: Vec<ClientId> = ids.iter().flatten().copied().collect();
    before_kill(&mut redis, &known);

    drop(a); // SIGKILL: no goodbye, no last write.
    let _b = serve(&redis, &master_addr, &saves);

    // Both find B through the directory and come back as themselves.
    for player in [&mut ann, &mut bob] {
        player.until(|p| !p.client.is_welcomed());
        player.until(|p| p.client.is_welcomed());
        player.until_turn(3);
    }
    assert_eq!(
        vec![ann.client.client_id(), bob.client.client_id()],
        ids,
        "the same ids"
    );
    ann.until(|p| {
        p.view
            .borrow()
            .as_ref()
            .is_some_and(|v| v.you == Some(NationId(0)))
    });
    bob.until(|p| {
        p.view
            .borrow()
            .as_ref()
            .is_some_and(|v| v.you == Some(NationId(1)))
    });
    assert_eq!(
        ann.view().unit_at(2, 3).map(|u| u.id),
        Some(infantry),
        "turn 1's move is in the resumed game"
    );

    // Turn three, played on B.
    ann.ask(GameAct::EndTurn);
    bob.ask(GameAct::EndTurn);
    ann.until_turn(4);
    bob.until_turn(4);
    let _ = std::fs::remove_dir_all(&saves);
}

/// The game's own client (`strategy --game NAME --master M --text`), driven
/// on its stdin, read on its stdout.
struct TextClient {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl TextClient {
    fn start(master: &str, name: &str) -> TextClient {
        let mut child = Command::new(BIN)
            .args([
                "--game", GAME_TWO, "--master", master, "--name", name, "--text",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = crate::process::stdout_lines(&mut child);
        TextClient {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    fn say(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for a line containing `text`.
    fn expect(&mut self, text: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            if self.seen.iter().any(|l| l.contains(text)) {
                self.seen.clear();
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!("no line with {text:?}; last lines: {:?}", self.seen),
            }
        }
    }
}

impl Drop for TextClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const GAME_TWO: &str = "failover-cli";

fn serve_named(
    redis: &RedisProcess,
    master: &str,
    saves: &PathBuf,
    game: &str,
    extra: &[&str],
) -> Server {
    let (child, lines) = start_server(redis, master, saves, game, extra);
    lines
        .iter()
        .find(|l| l.starts_with("SWITCHBOARD READY 1 "))
        .expect("ready line");
    Server(child)
}

/// A server process and its stdout's lines as they come.
fn start_server(
    redis: &RedisProcess,
    master: &str,
    saves: &PathBuf,
    game: &str,
    extra: &[&str],
) -> (Child, std::sync::mpsc::Receiver<String>) {
    let url = redis.url();
    let mut child = Command::new(BIN)
        .args(["--serve", "--port", "0", "--redis", &url, "--game", game])
        .args(["--master", master, "--saves"])
        .arg(saves)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = crate::process::stdout_lines(&mut child);
    // Its log (stderr) read and dropped, so that it never blocks.
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(
        move || {
            for _ in BufReader::new(stderr).lines().map_while(Result::ok) {}
        },
    );
    (child, lines)
}

#[test]
fn the_game_s_own_client_follows_its_game_to_another_server_through_the_master() {
    let (redis, master, master_addr, saves) = service("failover-cli");
    let a = serve_named(&redis, &master_addr, &saves, GAME_TWO, &["--new-game"]);
    // The client looks the game up once at start: wait until it is listed.
    let directory = Directory {
        masters: vec![master.local_addr()],
        game: GAME_TWO.into(),
    };
    wait_for(|| directory.servers().ok().filter(|s| !s.is_empty()));
    let mut ann = TextClient::start(&master_addr, "ann");
    ann.expect("joined as ann");
    ann.say("pick 0");
    ann.say("ready");
    ann.say("start");
    ann.expect("the game begins");
    ann.say("e");
    ann.expect("turn 2 begins");
    ann.say("e");
    ann.expect("turn 3 begins");
    wait_for(|| checkpoint_turn(&redis, GAME_TWO).filter(|t| *t == 3));

    drop(a); // SIGKILL
    let _b = serve_named(&redis, &master_addr, &saves, GAME_TWO, &[]);
    ann.expect("reconnected: same nation, same game");
    ann.say("e");
    ann.expect("turn 4 begins");
    ann.say("q");
    let _ = std::fs::remove_dir_all(&saves);
}

#[test]
fn a_second_server_for_a_game_waits_for_its_lease_and_takes_over_at_once_after_a_clean_stop() {
    let (redis, _master, master_addr, saves) = service("failover-lease");
    let game = "failover-lease";
    let a = serve_named(&redis, &master_addr, &saves, game, &["--new-game"]);
    // B waits: the game has its server.
    let (b, lines) = start_server(&redis, &master_addr, &saves, game, &[]);
    let _b = Server(b);
    let waiting = lines.recv_timeout(WAIT).unwrap();
    assert!(waiting.contains("waiting for its lease"), "{waiting}");
    assert!(
        lines.recv_timeout(Duration::from_millis(1500)).is_err(),
        "B serves while A holds the game"
    );
    // A stops cleanly (SIGTERM): it lets the lease go, B takes over at once.
    let stopped = Instant::now();
    let mut a = a;
    sigterm(&a.0);
    let _ = a.0.wait();
    let ready = loop {
        let line = lines.recv_timeout(WAIT).expect("B never served the game");
        if line.starts_with("SWITCHBOARD READY") {
            break stopped.elapsed();
        }
    };
    assert!(ready < Duration::from_secs(2), "B took {ready:?}");
    let _ = std::fs::remove_dir_all(&saves);
}

#[test]
fn a_server_for_a_game_with_no_checkpoint_says_it_is_not_found_unless_asked_for_a_new_one() {
    let (redis, _master, _master_addr, saves) = service("failover-missing");
    let output = Command::new(BIN)
        .args(["--serve", "--port", "0", "--redis", &redis.url()])
        .args(["--game", "never-started", "--saves"])
        .arg(&saves)
        .output()
        .unwrap();
    assert!(!output.status.success(), "it does not start a fresh game");
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("game never-started not found") && err.contains("--new-game"),
        "{err}"
    );
    // The lease was let go: a server asked for the new game starts at once.
    let started = Instant::now();
    let _new = serve_named(
        &redis,
        "127.0.0.1:9",
        &saves,
        "never-started",
        &["--new-game"],
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&saves);
}

/// SIGTERM, as an operator's `kill` sends it.
fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits until `player` is back after its server died, then ends its turn:
/// when that order is accepted.
fn back_and_accepted(player: &mut Player) -> Instant {
    player.until(|p| !p.client.is_welcomed());
    player.until(|p| p.client.is_welcomed() && p.view.borrow().is_some());
    player.ask(GameAct::EndTurn);
    Instant::now()
}

#[test]
fn failover_takes_under_two_seconds_with_a_standby_server_and_after_a_late_start() {
    let (redis, master, master_addr, saves) = service("failover-timing");
    let game = "failover-timing";
    let directory = Directory {
        masters: vec![master.local_addr()],
        game: game.into(),
    };
    let a = serve_named(&redis, &master_addr, &saves, game, &["--new-game"]);
    let mut ann = Player::join(&directory, "ann");
    ann.ask(LobbyAct::Pick(NationId(0)));
    ann.ask(LobbyAct::Ready(true));
    ann.ask(LobbyAct::Start);
    ann.until(|p| p.view.borrow().as_ref().is_some_and(|v| v.you.is_some()));
    wait_for(|| checkpoint_turn(&redis, game).filter(|t| *t == 1));

    // A standby server waits for the game's lease; A is killed.
    let (b, _lines) = start_server(&redis, &master_addr, &saves, game, &[]);
    let b = Server(b);
    std::thread::sleep(Duration::from_millis(300));
    let killed = Instant::now();
    drop(a);
    let with_standby = back_and_accepted(&mut ann).duration_since(killed);
    wait_for(|| checkpoint_turn(&redis, game).filter(|t| *t == 2));

    // B is killed with no standby; a replacement starts 3 s later.
    drop(b);
    std::thread::sleep(Duration::from_secs(3));
    let started = Instant::now();
    let _c = serve_named(&redis, &master_addr, &saves, game, &[]);
    let after_start = back_and_accepted(&mut ann).duration_since(started);
    eprintln!(
        "SIGKILL to the next accepted order with a standby: {with_standby:?}; \
         from a late replacement's start: {after_start:?}"
    );
    // The target is 2 s (docs/SCALING.md has the figures); a shared CI
    // machine gets slack.
    assert!(with_standby < Duration::from_secs(3), "{with_standby:?}");
    assert!(after_start < Duration::from_secs(3), "{after_start:?}");
    let _ = std::fs::remove_dir_all(&saves);
}
