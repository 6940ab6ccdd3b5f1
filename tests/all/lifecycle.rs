//! One server lifecycle: a server started with the builder gives its logic
//! back when it shuts down, or the panic that stopped it, as an error.

use std::time::Duration;

use switchboard::{
    ClientConfig, ClientId, GameLogic, NetworkClient, Outbox, Rejection, Request, RequestStatus,
    ServerError, ServerManager,
};

switchboard::channels! { enum Chan { Count = 16 } }
switchboard::actions! { enum Count in Chan::Count { Add(u32) = 1, Explode = 2 } }

/// Counts; panics when told to explode (a bug in a game's rules).
#[derive(Default)]
struct Counter(u32);

impl GameLogic for Counter {
    type Message = Count;
    type Command = Count;
    fn validate(&self, request: &Request<Count>) -> Result<Count, Rejection> {
        Ok(match request.message {
            Count::Add(n) => Count::Add(n),
            Count::Explode => Count::Explode,
        })
    }
    fn apply(&mut self, _: ClientId, command: Count, _: &mut Outbox) {
        match command {
            Count::Add(n) => self.0 += n,
            Count::Explode => panic!("the rules exploded at {}", self.0),
        }
    }
}

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn shutdown_returns_the_logic_with_every_applied_request() {
    let server = ServerManager::builder(Counter::default()).spawn().unwrap();
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    for n in [1, 2, 3] {
        let ticket = client.request(Count::Add(n)).unwrap();
        assert_eq!(client.wait(ticket, WAIT), RequestStatus::Accepted);
    }
    let counter = server.shutdown_blocking().unwrap();
    assert_eq!(counter.0, 6);
}

#[test]
fn a_panic_in_the_logic_comes_back_from_shutdown_as_an_error() {
    let server = ServerManager::builder(Counter::default()).spawn().unwrap();
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    let ticket = client.request(Count::Add(4)).unwrap();
    assert_eq!(client.wait(ticket, WAIT), RequestStatus::Accepted);
    let ticket = client.request(Count::Explode).unwrap();
    // The server is gone: the request gets no verdict.
    assert!(!client.wait(ticket, WAIT).is_accepted());
    match server.shutdown_blocking() {
        Err(ServerError::Panicked(text)) => assert_eq!(text, "the rules exploded at 4"),
        other => panic!("expected the panic, got {:?}", other.map(|c| c.0)),
    }
}

#[test]
fn the_websocket_port_is_set_like_the_tcp_port() {
    let server = ServerManager::builder(Counter::default())
        .port(0)
        .websocket_port(0)
        .spawn()
        .unwrap();
    let ws = server.websocket_addr().expect("a WebSocket listener");
    assert_ne!(ws.port(), server.local_addr().port());
    let mut client = NetworkClient::connect(format!("ws://{ws}/"), ClientConfig::named("web"));
    let ticket = client.request(Count::Add(7)).unwrap();
    assert_eq!(client.wait(ticket, WAIT), RequestStatus::Accepted);
    assert_eq!(server.shutdown_blocking().unwrap().0, 7);
}

#[test]
fn a_port_clash_names_the_address_it_could_not_listen_on() {
    let first = ServerManager::builder(Counter::default()).spawn().unwrap();
    let port = first.local_addr().port();
    let err = match ServerManager::builder(Counter::default())
        .port(port)
        .spawn()
    {
        Err(err) => err.to_string(),
        Ok(_) => panic!("two servers listen on port {port}"),
    };
    assert!(
        err.contains(&format!("cannot listen on 127.0.0.1:{port}"))
            && err.contains("another program has that port"),
        "{err}"
    );
    first.shutdown_blocking().unwrap();
}
