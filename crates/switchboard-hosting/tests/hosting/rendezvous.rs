//! The join-code relay over loopback: a real `ServerManager` as the host,
//! real clients (TCP and WebSocket) joining by code, and the relay's limits
//! under attack.

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard::prelude::*;
use switchboard::ClientEvent;
use switchboard_hosting::rendezvous::frames::Frame;
use switchboard_hosting::{
    HostConfig, HostLink, HostStatus, HostTarget, RendezvousConfig, RendezvousHandle,
    RendezvousServer, RunningRendezvous,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

channels! { pub(crate) enum Chan { Score = 16 } }
actions! { #[derive(Debug)] pub(crate) enum Score in Chan::Score { Add(u32) = 1, Total(u32) = 2 } }

/// The host's rules: add 1 to 10 points; everyone hears the new total.
pub(crate) struct Points(u32);
impl GameLogic for Points {
    type Message = Score;
    type Command = u32;
    fn validate(&self, request: &Request<Score>) -> Result<u32, Rejection> {
        match request.message {
            Score::Add(n @ 1..=10) => Ok(n),
            _ => Err(Rejection::invalid("add 1 to 10 points")),
        }
    }
    fn apply(&mut self, _: ClientId, n: u32, out: &mut Outbox) {
        self.0 += n;
        out.send(Audience::All, Score::Total(self.0));
    }
}

pub(crate) const WAIT: Duration = Duration::from_secs(5);

/// A relay (TCP and WebSocket) with `config`.
pub(crate) async fn relay(config: RendezvousConfig) -> RunningRendezvous {
    RendezvousServer::builder()
        .websocket_port(0)
        .config(config)
        .spawn()
        .unwrap()
}

/// A host: a game server in this process, linked to `relay` (at `via`):
/// its code once registered.
pub(crate) async fn host(via: String) -> (RunningServer<Points>, HostLink, String) {
    match host_linked(HostConfig::new(via)).await {
        (server, link, HostStatus::Ready { code, .. }) => (server, link, code),
        (_, _, other) => panic!("{other}"),
    }
}

/// A host linked by `config`, and the relay's first answer.
pub(crate) async fn host_linked(
    config: HostConfig,
) -> (RunningServer<Points>, HostLink, HostStatus) {
    // The host lets a player send fast: the relay's pace is under test.
    let mut manager = ManagerConfig::default();
    manager.rules.message_rate.per_second = 10_000.0;
    manager.rules.message_rate.burst = 10_000.0;
    let server = ServerManager::builder(Points(0))
        .config(manager)
        .spawn()
        .unwrap();
    let handle = server.handle();
    let attach = move |stream: Box<dyn switchboard::socket::ByteStream>, addr| {
        handle.attach(stream, addr).is_some()
    };
    let mut link = HostLink::start(config, HostTarget::Attach(Arc::new(attach)));
    let status = link.ready().await;
    (server, link, status)
}

/// Runs `f` on a thread of its own, as a game's loop (a `NetworkClient`
/// is polled there, outside any runtime).
pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = done.send(f());
    });
    result.await.expect("the game's thread panicked")
}

/// The dialer of join codes, the host pinned: the hosts here present the
/// identity of this machine's data directory (`HostConfig::identity`'s
/// default).
pub(crate) fn dialer() -> switchboard::socket::Dialer {
    use switchboard::tls::{default_data_dir, ServerIdentity, ServerTrust};
    let host = ServerIdentity::load_or_create(&default_data_dir()).unwrap();
    switchboard_hosting::JoinCodes::dialer().trust(ServerTrust::pinned(host.fingerprint()))
}

/// A client that joined `addr` (welcomed, so requests may go).
pub(crate) fn joined(addr: String, name: &str) -> NetworkClient {
    joined_with(dialer(), addr, name)
}

/// A client that joined `addr` through `dialer`.
pub(crate) fn joined_with(
    dialer: switchboard::socket::Dialer,
    addr: String,
    name: &str,
) -> NetworkClient {
    let mut client = NetworkClient::connect_via(dialer, addr, ClientConfig::named(name));
    let deadline = Instant::now() + WAIT;
    let mut heard = Vec::new();
    while !client.is_welcomed() {
        assert!(
            Instant::now() < deadline,
            "{name} was not welcomed: {heard:?}"
        );
        heard.extend(
            client
                .drain_timeout(Duration::from_millis(10))
                .map(|e| format!("{e:?}")),
        );
    }
    client
}

/// Why a client joining `addr` was turned away.
fn turned_away(addr: String) -> String {
    let mut client = NetworkClient::connect_via(dialer(), addr, ClientConfig::named("eve"));
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        for event in client
            .drain_timeout(Duration::from_millis(20))
            .collect::<Vec<_>>()
        {
            if let ClientEvent::Disconnected(reason) = event {
                return reason.to_string();
            }
        }
    }
    panic!("not turned away");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_players_over_tcp_and_websocket_play_with_the_hosts_own_rules() {
    let relay = relay(RendezvousConfig::default()).await;
    let (server, _link, code) = host(relay.local_addr().to_string()).await;
    let tcp = format!("{code}@{}", relay.local_addr());
    let ws = format!("ws://{}/{code}", relay.websocket_addr().unwrap());
    let handle = server.handle();
    let (verdicts, mut names) = blocking(move || {
        let mut ann = joined(tcp, "ann");
        let mut bob = joined(ws, "bob");
        let ask = |client: &mut NetworkClient, n| {
            let ticket = client.request(Score::Add(n)).unwrap();
            client.wait(ticket, WAIT)
        };
        let verdicts = vec![ask(&mut ann, 3), ask(&mut ann, 50), ask(&mut bob, 4)];
        // Bob, over WebSocket, hears the total ann's request made.
        let mut totals = Vec::new();
        let deadline = Instant::now() + WAIT;
        while !totals.contains(&7) && Instant::now() < deadline {
            for event in bob
                .drain_timeout(Duration::from_millis(20))
                .collect::<Vec<_>>()
            {
                if let ClientEvent::Message(m) = event {
                    if let Ok(Score::Total(t)) = m.typed::<Score>() {
                        totals.push(t);
                    }
                }
            }
        }
        assert!(totals.contains(&7), "{totals:?}");
        // The host's server has both as its own clients.
        let host = handle.stats_blocking(WAIT).unwrap();
        let names: Vec<String> = host.clients.iter().map(|c| c.name.clone()).collect();
        (verdicts, names)
    })
    .await;
    assert_eq!(verdicts[0], RequestStatus::Accepted);
    assert_eq!(
        verdicts[1],
        RequestStatus::Rejected("add 1 to 10 points".into())
    );
    assert_eq!(verdicts[2], RequestStatus::Accepted);
    names.sort();
    assert_eq!(names, ["ann", "bob"]);
    let stats = relay.stats();
    assert_eq!((stats.codes, stats.joined), (1, 2));
    assert!(stats.bytes > 0);
}

/// A TCP proxy whose connections can be cut (a player's line dropping).
struct Cutter {
    addr: std::net::SocketAddr,
    cut: Arc<tokio::sync::watch::Sender<u32>>,
}

impl Cutter {
    async fn start(to: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, cuts) = tokio::sync::watch::channel(0);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut cuts = cuts.clone();
                cuts.mark_unchanged();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(to).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cuts.changed() => {}
                    }
                });
            }
        });
        Self {
            addr,
            cut: Arc::new(cut),
        }
    }

    /// Cuts every connection open now (from any thread).
    fn cutter(&self) -> impl Fn() + Send + 'static {
        let cut = self.cut.clone();
        move || cut.send_modify(|n| *n += 1)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_player_whose_line_drops_comes_back_with_its_id() {
    let relay = relay(RendezvousConfig::default()).await;
    let (_server, _link, code) = host(relay.local_addr().to_string()).await;
    let line = Cutter::start(relay.local_addr()).await;
    let addr = format!("{code}@{}", line.addr);
    let cut = line.cutter();
    let (id, ann_id, verdict) = blocking(move || {
        let mut ann = joined(addr, "ann");
        let ticket = ann.request(Score::Add(1)).unwrap();
        assert_eq!(ann.wait(ticket, WAIT), RequestStatus::Accepted);
        let id = ann.client_id();
        cut();
        let deadline = Instant::now() + WAIT;
        let mut lost = false;
        while Instant::now() < deadline && !(lost && ann.is_welcomed()) {
            for event in ann
                .drain_timeout(Duration::from_millis(20))
                .collect::<Vec<_>>()
            {
                lost |= matches!(event, ClientEvent::ConnectionLost(_));
            }
        }
        assert!(lost, "the line was not cut");
        let ticket = ann.request(Score::Add(2)).unwrap();
        (id, ann.client_id(), ann.wait(ticket, WAIT))
    })
    .await;
    assert!(id.is_some());
    assert_eq!(ann_id, id);
    assert_eq!(verdict, RequestStatus::Accepted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_host_whose_line_drops_keeps_its_code_and_a_player_joining_meanwhile_waits() {
    let relay = relay(RendezvousConfig::default()).await;
    let line = Cutter::start(relay.local_addr()).await;
    let (_server, link, code) = host(line.addr.to_string()).await;
    let mut changes = link.watch();
    line.cutter()();
    let lost = tokio::time::timeout(WAIT, changes.wait_for(|s| matches!(s, HostStatus::Lost(_))))
        .await
        .map(|lost| lost.is_ok());
    assert_eq!(lost, Ok(true));
    // Bob joins while the host is away: the relay waits for it to come back.
    let addr = format!("{code}@{}", relay.local_addr());
    let verdict = blocking(move || {
        let mut bob = joined(addr, "bob");
        let ticket = bob.request(Score::Add(5)).unwrap();
        bob.wait(ticket, WAIT)
    })
    .await;
    assert_eq!(verdict, RequestStatus::Accepted);
    assert!(matches!(link.status(), HostStatus::Ready { code: again, .. } if again == code));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_unknown_is_refused_with_the_reason() {
    let relay = relay(RendezvousConfig::default()).await;
    let addr = format!("ZZZZZZ@{}", relay.local_addr());
    let why = blocking(move || turned_away(addr)).await;
    assert!(why.contains("no game has the join code"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_expires_once_its_host_is_gone_past_the_grace() {
    let config = RendezvousConfig {
        host_grace: Duration::from_millis(300),
        ..RendezvousConfig::default()
    };
    let relay = relay(config).await;
    let (_server, link, code) = host(relay.local_addr().to_string()).await;
    link.stop();
    let stopped = Instant::now();
    let deadline = stopped + WAIT;
    while relay.stats().codes > 0 {
        assert!(Instant::now() < deadline, "{:?}", relay.stats());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Not before the grace: the host might have come back within it.
    assert!(stopped.elapsed() >= Duration::from_millis(300));
    let addr = format!("{code}@{}", relay.local_addr());
    let why = blocking(move || turned_away(addr)).await;
    assert!(why.contains("no game has the join code"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_guessing_is_cut_off_after_its_share_of_wrong_codes() {
    let config = RendezvousConfig {
        wrong_codes_per_minute: 3,
        ..RendezvousConfig::default()
    };
    let relay = relay(config).await;
    let (_server, _link, code) = host(relay.local_addr().to_string()).await;
    let at = relay.local_addr();
    let whys = blocking(move || {
        let whys: Vec<String> = ["AAAAAA", "BBBBBB", "CCCCCC", "DDDDDD", "EEEEEE"]
            .iter()
            .map(|guess| turned_away(format!("{guess}@{at}")))
            .collect();
        // The right code still gets in: a player who mistyped is not
        // locked out of its game, and a guesser checks no more codes.
        assert!(joined(format!("{code}@{at}"), "ann").is_welcomed());
        whys
    })
    .await;
    assert!(
        whys[..3]
            .iter()
            .all(|w| w.contains("no game has the join code")),
        "{whys:?}"
    );
    assert!(
        whys[3..]
            .iter()
            .all(|w| w.contains("too many wrong join codes")),
        "{whys:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_hoarding_by_one_address_is_refused_with_the_reason() {
    let config = RendezvousConfig {
        max_codes_per_address: 2,
        ..RendezvousConfig::default()
    };
    let relay = relay(config).await;
    let via = relay.local_addr().to_string();
    let (_a, _la, _) = host(via.clone()).await;
    let (_b, _lb, _) = host(via.clone()).await;
    let mut third = HostLink::start(
        HostConfig::new(via),
        HostTarget::Forward(relay.local_addr()),
    );
    let status = third.ready().await;
    assert!(
        matches!(&status, HostStatus::Refused(why) if why.contains("holds 2 codes already")),
        "{status}"
    );
    assert_eq!(relay.stats().codes, 2);
}

/// Connects to the relay and sends `bytes`; how the relay answered: the
/// bytes it sent before closing, or `None` if it kept the connection open
/// for `wait`.
pub(crate) async fn relay_answer(
    relay: &RendezvousHandle,
    bytes: &[u8],
    wait: Duration,
) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect(relay.local_addr()).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut got = Vec::new();
    match tokio::time::timeout(wait, stream.read_to_end(&mut got)).await {
        Ok(_) => Some(got),
        Err(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_silent_connections_are_closed_and_capped_per_address() {
    let config = RendezvousConfig {
        first_frame_timeout: Duration::from_millis(300),
        max_pending_per_address: 2,
        ..RendezvousConfig::default()
    };
    let relay = relay(config).await;
    // Two silent connections hold the address's share...
    let silent: Vec<TcpStream> =
        futures::future::join_all((0..2).map(|_| TcpStream::connect(relay.local_addr())))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
    let deadline = Instant::now() + WAIT;
    while relay.stats().unclassified < 2 {
        assert!(Instant::now() < deadline, "{:?}", relay.stats());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // ...so a third is closed at once, before it says anything.
    let started = Instant::now();
    let third = relay_answer(&relay, b"", Duration::from_millis(250)).await;
    assert_eq!(third, Some(Vec::new()));
    assert!(started.elapsed() < Duration::from_millis(250));
    // And the silent ones are closed after the first-frame timeout.
    for mut stream in silent {
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(WAIT, stream.read_to_end(&mut rest)).await;
        assert!(matches!(closed, Ok(Ok(0))), "{closed:?}");
    }
    // Counted once each is let go, which may be just after its close.
    let deadline = Instant::now() + WAIT;
    while relay.stats().refused < 3 {
        assert!(Instant::now() < deadline, "{:?}", relay.stats());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_data_connection_with_a_wrong_secret_is_refused() {
    let relay = relay(RendezvousConfig::default()).await;
    let (_server, _link, _code) = host(relay.local_addr().to_string()).await;
    let forged = Frame::Data {
        secret: [9u8; 16],
        ticket: 1,
    }
    .encode();
    let answer = relay_answer(&relay, &forged, WAIT).await;
    assert_eq!(answer, Some(Vec::new()));
    assert_eq!(relay.stats().refused, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_frame_over_the_limit_ends_the_pipe() {
    let config = RendezvousConfig {
        max_frame_len: 1024,
        ..RendezvousConfig::default()
    };
    let relay = relay(config).await;
    let (_server, _link, code) = host(relay.local_addr().to_string()).await;
    let mut bytes = Frame::Join { code }.encode();
    bytes.extend(switchboard_proto::connection::control::hello_frame(1));
    // A frame announcing 1 MiB: refused on its length, before its body.
    bytes.extend((1024u32 * 1024).to_be_bytes());
    let answer = relay_answer(&relay, &bytes, WAIT).await;
    // The relay hung up (with at most the host's hello piped before).
    let answer = answer.expect("the relay hung up");
    let hello = switchboard_proto::connection::control::hello_frame(1);
    assert!(hello.starts_with(&answer), "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_fast_sender_is_paced_and_loses_nothing() {
    const RATE: f64 = 20_000.0;
    let config = RendezvousConfig {
        bytes_per_second_per_code: RATE as u64,
        ..RendezvousConfig::default()
    };
    let relay = relay(config).await;
    let (server, _link, code) = host(relay.local_addr().to_string()).await;
    let addr = format!("{code}@{}", relay.local_addr());
    let (accepted, took) = blocking(move || {
        let mut ann = joined(addr, "ann");
        let ticket = ann.request(Score::Add(1)).unwrap();
        assert_eq!(ann.wait(ticket, WAIT), RequestStatus::Accepted);
        let started = Instant::now();
        // In batches: a client keeps a bounded number of requests in flight.
        let mut accepted = 0;
        for _ in 0..20 {
            let tickets: Vec<_> = (0..100)
                .map(|_| ann.request(Score::Add(1)).unwrap())
                .collect();
            accepted += tickets
                .into_iter()
                .filter(|t| ann.wait(*t, Duration::from_secs(20)) == RequestStatus::Accepted)
                .count();
        }
        (accepted, started.elapsed())
    })
    .await;
    assert_eq!(accepted, 2000);
    // Requests, verdicts and totals through the relay: past the first
    // second's worth (let through at once), RATE bytes a second.
    // (About 33 bytes a request: request, verdict, total.)
    let piped = relay.stats().bytes as f64;
    assert!(piped > 2.0 * RATE, "{piped}");
    let least = Duration::from_secs_f64(0.9 * (piped - RATE) / RATE);
    assert!(took >= least, "{took:?} for {piped} bytes");
    assert_eq!(server.shutdown().await.unwrap().0, 2001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_players_past_the_limits_per_code_and_per_address_are_told_why() {
    for (per_code, per_address, expected) in [
        (
            1,
            10,
            "the game is full at the relay (at most 1 players a game)",
        ),
        (10, 1, "too many players from your address at this relay"),
    ] {
        let config = RendezvousConfig {
            max_players_per_code: per_code,
            max_players_per_address: per_address,
            ..RendezvousConfig::default()
        };
        let relay = relay(config).await;
        let (_server, _link, code) = host(relay.local_addr().to_string()).await;
        let addr = format!("{code}@{}", relay.local_addr());
        let why = blocking(move || {
            let _ann = joined(addr.clone(), "ann");
            turned_away(addr)
        })
        .await;
        assert!(why.contains(expected), "{why}");
    }
}

/// Twenty players, each joining the instant its host shows its code. The
/// relay once sent a host its code before it took the host's announcements:
/// under load, a player joining in between was turned away ("the host did
/// not answer"). Rare on an idle machine; this keeps the path exercised.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_player_joining_the_instant_the_code_is_shown_finds_the_host() {
    let config = RendezvousConfig {
        max_codes_per_address: 20,
        max_codes_per_prefix: 20,
        ..RendezvousConfig::default()
    };
    let relay = relay(config).await;
    for _ in 0..20 {
        let (_server, _link, code) = host(relay.local_addr().to_string()).await;
        let addr = format!("{code}@{}", relay.local_addr());
        let welcomed = blocking(move || joined(addr, "ann").is_welcomed()).await;
        assert!(welcomed);
    }
}
