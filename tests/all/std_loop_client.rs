//! A client driven by a plain loop over `std::net::TcpStream`, as an
//! engine's frame loop would: `switchboard_proto`'s `ConnectionCore` and
//! `ClientCore`, no tokio and no runtime on the client's side, against a
//! real `ServerManager`.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use switchboard::prelude::*;
use switchboard_proto::client::{ClientAction, ClientCore};
use switchboard_proto::connection::{ConnectionCore, SocketConfig, SocketEvent};
use switchboard_proto::reason::CloseCode;

channels! { enum Chan { Count = 16 } }
actions! {
    #[derive(Debug, PartialEq)]
    enum Count in Chan::Count { Add(u32) = 1, Total(u32) = 2 }
}

struct Counter(u32);

impl GameLogic for Counter {
    type Message = Count;
    type Command = u32;
    fn validate(&self, request: &Request<Count>) -> Result<u32, Rejection> {
        match request.message {
            Count::Add(n @ 1..=10) => Ok(n),
            _ => Err(Rejection::invalid("1 to 10")),
        }
    }
    fn apply(&mut self, _: ClientId, n: u32, out: &mut Outbox) {
        self.0 += n;
        out.send(Audience::All, Count::Total(self.0));
    }
}

/// The whole driver: a socket, the two cores, and one `frame()` a game
/// calls per frame.
struct StdClient {
    addr: SocketAddr,
    stream: Option<(TcpStream, ConnectionCore)>,
    core: ClientCore,
    heard: Vec<ClientEvent>,
}

impl StdClient {
    fn connect(addr: SocketAddr, name: &str) -> Self {
        let mut core = ClientCore::new(ClientConfig::named(name), 7);
        core.start();
        let mut client = Self {
            addr,
            stream: None,
            core,
            heard: Vec::new(),
        };
        client.carry_out(Instant::now());
        client
    }

    /// What a frame of the game does: read what came, run the clocks,
    /// write what is due.
    fn frame(&mut self) {
        let now = Instant::now();
        if let Some((stream, conn)) = self.stream.as_mut() {
            let mut buf = [0u8; 16 * 1024];
            if conn.wants_read() {
                match stream.read(&mut buf) {
                    Ok(0) => conn.handle_eof(now),
                    Ok(n) => conn.handle_bytes(&buf[..n], now),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(e) => conn.handle_error(e),
                }
            }
            if conn.poll_timeout().is_some_and(|at| at <= now) {
                conn.handle_timeout(now);
            }
        }
        self.pump(now);
        self.core.tick(now);
        self.carry_out(now);
        self.heard
            .extend(std::iter::from_fn(|| self.core.poll_event()));
    }

    /// The connection's events into the client core; its bytes onto the socket.
    fn pump(&mut self, now: Instant) {
        let Some((stream, conn)) = self.stream.as_mut() else {
            return;
        };
        while let Some(bytes) = conn.poll_transmit() {
            let _ = stream.write_all(&bytes);
        }
        if conn.should_shutdown() {
            let _ = stream.shutdown(std::net::Shutdown::Write);
        }
        let mut ended = false;
        while let Some(event) = conn.poll_event() {
            ended |= matches!(event, SocketEvent::Disconnected(_));
            self.core.handle(event, now);
        }
        if ended {
            self.stream = None;
        }
    }

    fn carry_out(&mut self, now: Instant) {
        while let Some(action) = self.core.poll_action() {
            match action {
                ClientAction::Connect => {
                    let stream = TcpStream::connect(self.addr).expect("the server listens");
                    stream
                        .set_read_timeout(Some(Duration::from_millis(2)))
                        .unwrap();
                    let conn = ConnectionCore::new(SocketConfig::default(), now);
                    self.stream = Some((stream, conn));
                }
                ClientAction::Send(message) => {
                    if let Some((_, conn)) = self.stream.as_mut() {
                        let _ = conn.send(&message, now);
                    }
                }
                ClientAction::Close(reason) => {
                    if let Some((_, conn)) = self.stream.as_mut() {
                        conn.close(CloseCode::NORMAL, &reason, now);
                    }
                }
            }
        }
        self.pump(now);
    }

    fn until(&mut self, what: &str, mut done: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(self) {
            assert!(Instant::now() < deadline, "{what}: not in time");
            self.frame();
        }
    }
}

#[test]
fn a_plain_std_loop_joins_requests_hears_updates_and_leaves() {
    let server = ServerManager::builder(Counter(0)).spawn().unwrap();
    let mut client = StdClient::connect(server.local_addr(), "ann");
    client.until("welcomed", |c| c.core.is_welcomed());

    let yes = client.core.request(&Count::Add(4), Instant::now()).unwrap();
    let no = client
        .core
        .request(&Count::Add(40), Instant::now())
        .unwrap();
    client.carry_out(Instant::now());
    client.until("verdicts", |c| {
        c.core.status(yes).is_done() && c.core.status(no).is_done()
    });
    assert_eq!(client.core.status(yes), RequestStatus::Accepted);
    assert_eq!(
        client.core.status(no),
        RequestStatus::Rejected("1 to 10".into())
    );
    let totals: Vec<Count> = client
        .heard
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Message(m) => m.typed().ok(),
            _ => None,
        })
        .collect();
    assert_eq!(totals, [Count::Total(4)]);

    client.core.close("bye");
    client.carry_out(Instant::now());
    client.until("gone", |c| c.stream.is_none());
    assert!(client
        .heard
        .iter()
        .any(|e| matches!(e, ClientEvent::Disconnected(_))));
    assert_eq!(server.shutdown_blocking().unwrap().0, 4);
}
