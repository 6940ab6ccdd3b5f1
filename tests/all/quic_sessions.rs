//! One session whatever the transport: a player who joined over TCP
//! resumes over QUIC with its id and token, and the reverse; a player whose
//! device changes networks keeps its QUIC connection and session with no
//! reconnect.

use crate::common::{Proxy, UdpProxy};

use std::time::{Duration, Instant};

use switchboard::{
    ClientConfig, ClientEvent, ClientId, GameLogic, NetworkClient, Outbox, Rejection, Request,
    RequestStatus, ServerManager, SocketConfig,
};

switchboard::channels! { enum Chan { Score = 16 } }
switchboard::actions! {
    #[derive(Debug, PartialEq)]
    enum Act in Chan::Score { Add(u32) = 1 }
}

struct Score(u32);

impl GameLogic for Score {
    type Message = Act;
    type Command = u32;
    fn validate(&self, request: &Request<Act>) -> Result<u32, Rejection> {
        let Act::Add(n) = request.message;
        (n <= 10)
            .then_some(n)
            .ok_or_else(|| Rejection::invalid("at most 10"))
    }
    fn apply(&mut self, _: ClientId, n: u32, _: &mut Outbox) {
        self.0 += n;
    }
}

const WAIT: Duration = Duration::from_secs(10);

fn serve() -> switchboard::RunningServer<Score> {
    ServerManager::builder(Score(0))
        .quic_port(0)
        .spawn()
        .unwrap()
}

/// A client whose connection notices a dead path within about a second.
fn quick_to_notice(name: &str) -> ClientConfig {
    ClientConfig {
        socket: SocketConfig {
            keepalive_interval: Duration::from_millis(200),
            idle_timeout: Duration::from_millis(1000),
            ..SocketConfig::default()
        },
        ..ClientConfig::named(name)
    }
}

/// Waits for the client's next welcome: whether it resumed.
fn welcomed(client: &mut NetworkClient) -> bool {
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "no welcome in time");
        for event in client.drain_timeout(Duration::from_millis(20)) {
            if let ClientEvent::Welcomed(welcome) = event {
                return welcome.resumed;
            }
        }
    }
}

/// Waits until the client has lost its connection.
fn lost(client: &mut NetworkClient) {
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "the connection did not drop");
        for event in client.drain_timeout(Duration::from_millis(20)) {
            if let ClientEvent::ConnectionLost(_) = event {
                return;
            }
        }
    }
}

/// A request the server accepts, within the deadline.
fn accepted(client: &mut NetworkClient, n: u32) {
    let ticket = client.request(Act::Add(n)).unwrap();
    assert_eq!(client.wait(ticket, WAIT), RequestStatus::Accepted);
}

#[test]
fn a_player_who_joined_over_tcp_resumes_over_quic_with_its_id() {
    let server = serve();
    let proxy = Proxy::start(server.local_addr());
    let mut client = NetworkClient::connect(proxy.addr, quick_to_notice("ann"));
    assert!(!welcomed(&mut client));
    let id = client.client_id().unwrap();
    accepted(&mut client, 2);
    proxy.cut();
    lost(&mut client);
    client.redirect(vec![format!("quic://{}", server.quic_addr().unwrap())]);
    assert!(welcomed(&mut client), "the session resumed");
    assert_eq!(client.client_id(), Some(id));
    accepted(&mut client, 3);
    let stats = server.stats_blocking(WAIT).unwrap();
    assert_eq!((stats.sessions, stats.resumes_total), (1, 1));
    assert_eq!(server.shutdown_blocking().unwrap().0, 5);
}

#[test]
fn a_player_who_joined_over_quic_resumes_over_tcp_with_its_id() {
    let server = serve();
    let proxy = UdpProxy::start(server.quic_addr().unwrap());
    let mut client =
        NetworkClient::connect(format!("quic://{}", proxy.addr), quick_to_notice("bo"));
    assert!(!welcomed(&mut client));
    let id = client.client_id().unwrap();
    accepted(&mut client, 4);
    proxy.go_dark();
    lost(&mut client);
    client.redirect(vec![server.local_addr().to_string()]);
    assert!(welcomed(&mut client), "the session resumed");
    assert_eq!(client.client_id(), Some(id));
    accepted(&mut client, 1);
    let stats = server.stats_blocking(WAIT).unwrap();
    assert_eq!((stats.sessions, stats.resumes_total), (1, 1));
    assert_eq!(server.shutdown_blocking().unwrap().0, 5);
}

#[test]
fn a_player_whose_device_changes_networks_keeps_its_session_without_a_reconnect() {
    let server = serve();
    let addr = format!("quic://{}", server.quic_addr().unwrap());
    let mut client = NetworkClient::connect(addr, ClientConfig::named("cy"));
    assert!(!welcomed(&mut client));
    accepted(&mut client, 1);
    let before = server.stats_blocking(WAIT).unwrap().clients[0].addr;
    let moved = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    client.rebind(moved).unwrap();
    accepted(&mut client, 2);
    let stats = server.stats_blocking(WAIT).unwrap();
    let after = stats.clients[0].addr;
    assert_ne!(before, after, "the server sees the new address");
    assert_eq!(
        (stats.connections_total, stats.resumes_total),
        (1, 0),
        "no reconnect"
    );
    // Nothing ended on the client's side either.
    let events: Vec<_> = client.drain_timeout(Duration::from_millis(50)).collect();
    assert!(
        events.iter().all(|e| !matches!(
            e,
            ClientEvent::ConnectionLost(_) | ClientEvent::Disconnected(_)
        )),
        "{events:?}"
    );
    assert_eq!(server.shutdown_blocking().unwrap().0, 3);
}
