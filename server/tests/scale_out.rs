//! Scale-out with real processes and a real Redis: two board servers share
//! their sessions; the one a client plays on is killed (SIGKILL), and the
//! client resumes on the other with its id.

use std::cell::RefCell;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use switchboard::{ClientConfig, NetworkClient, ReconnectPolicy, RequestStatus};
use switchboard_redis::testing::RedisProcess;
use switchboard_redis::{RedisConfig, RedisStore};
use switchboard_server::board::{BoardAction, BoardChannel};

const BIN: &str = env!("CARGO_BIN_EXE_switchboard-server");
const WAIT: Duration = Duration::from_secs(15);

/// A child process that is killed (SIGKILL) when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn board_server(redis: &RedisProcess) -> (Proc, String) {
    let url = redis.url();
    let mut child = Command::new(BIN)
        .args(["--port", "0", "--bind", "loopback", "--grace-secs", "30"])
        .args(["--redis", &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let port: u16 = stdout
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("SWITCHBOARD READY 1 ")?.trim().parse().ok())
        .expect("ready line");
    (Proc(child), format!("127.0.0.1:{port}"))
}

/// Whether Redis holds `client`'s session.
fn session_stored(redis: &RedisProcess, client: switchboard::ClientId) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = RedisStore::open(RedisConfig {
            url: redis.url(),
            ..RedisConfig::default()
        })
        .unwrap();
        let key = store.key(format_args!("session:{client}"));
        store
            .run(|mut c| async move {
                redis::cmd("EXISTS")
                    .arg(&key)
                    .query_async::<bool>(&mut c)
                    .await
            })
            .await
            .unwrap_or(false)
    })
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not in time");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn say(client: &mut NetworkClient, line: &str) -> RequestStatus {
    let ticket = client
        .request(BoardChannel::Board, BoardAction::Say, &line)
        .unwrap();
    wait_until("verdict", || {
        client.poll();
        ticket.is_done()
    });
    ticket.status()
}

#[test]
fn a_client_whose_server_is_killed_resumes_on_another_with_its_id() {
    let redis = RedisProcess::start().unwrap();
    let (a_proc, a) = board_server(&redis);
    let (_b_proc, b) = board_server(&redis);
    let config = ClientConfig {
        fallback_servers: vec![b.clone()],
        reconnect: ReconnectPolicy {
            initial_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(200),
            ..ReconnectPolicy::default()
        },
        ..ClientConfig::named("ada")
    };
    let mut client = NetworkClient::connect(&a, config);
    let welcomes = Rc::new(RefCell::new(Vec::new()));
    let sink = welcomes.clone();
    client
        .signals()
        .welcomed
        .connect(move |w| sink.borrow_mut().push((w.client, w.resumed)));
    wait_until("welcome on A", || {
        client.poll();
        client.is_welcomed()
    });
    let id = client.client_id().unwrap();
    assert_eq!(say(&mut client, "on A"), RequestStatus::Accepted);
    // A writes the session to Redis just after its welcome; once it is
    // there, A is killed outright.
    wait_until("the session in Redis", || session_stored(&redis, id));
    drop(a_proc);

    wait_until("welcome on B", || {
        client.poll();
        welcomes.borrow().len() == 2
    });
    assert_eq!(welcomes.borrow()[1], (id, true), "the same id, resumed");
    assert_eq!(client.client_id(), Some(id));
    assert_eq!(say(&mut client, "on B"), RequestStatus::Accepted);
}
