//! `NetworkClient`'s three ways of handing events to a game, over loopback:
//! pulled with `drain`, awaited as a `Stream`, and a ticket waited on; and
//! subscriptions that stay until disconnected or tied to a scope.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use switchboard::{
    Audience, BindScope, ClientConfig, ClientEvent, ClientId, GameLogic, ManagerConfig,
    NetworkClient, Outbox, Rejection, Request, RequestStatus, ServerManager,
};

switchboard::channels! { enum Chan { Score = 16 } }
switchboard::actions! { enum Act { Add = 1, Total = 2 } }

/// Adds 1 to 10 points; everyone hears the total.
struct Score(u32);

impl GameLogic for Score {
    type Command = u32;
    fn validate(&self, request: &Request) -> Result<u32, Rejection> {
        match request.content()? {
            n @ 1..=10 => Ok(n),
            _ => Err(Rejection::invalid("1 to 10 points")),
        }
    }
    fn apply(&mut self, _: ClientId, n: u32, out: &mut Outbox) {
        self.0 += n;
        out.send(Audience::All, Chan::Score, Act::Total, &self.0)
            .unwrap();
    }
}

const WAIT: Duration = Duration::from_secs(10);

fn serve() -> switchboard::ManagerHandle {
    ServerManager::spawn(BindScope::Loopback, 0, ManagerConfig::default(), Score(0)).unwrap()
}

#[test]
fn drain_hands_every_event_over_in_order_and_runs_no_slot() {
    let server = serve();
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    let slot_runs = Rc::new(Cell::new(0));
    let runs = slot_runs.clone();
    client.subscribe(Chan::Score, move |_| runs.set(runs.get() + 1));
    let ticket = client.request(Chan::Score, Act::Add, &4u32).unwrap();
    let mut events = Vec::new();
    let deadline = Instant::now() + WAIT;
    while !events
        .iter()
        .any(|e| matches!(e, ClientEvent::RequestDone { .. }))
    {
        assert!(Instant::now() < deadline, "no verdict in time: {events:?}");
        events.extend(client.drain_timeout(Duration::from_millis(20)));
    }
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            ClientEvent::Connected => "connected",
            ClientEvent::Welcomed(_) => "welcomed",
            ClientEvent::Message(_) => "message",
            ClientEvent::RequestDone { .. } => "done",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["connected", "welcomed", "message", "done"]);
    let ClientEvent::Message(total) = &events[2] else {
        unreachable!()
    };
    assert_eq!(total.content::<u32>().unwrap(), 4);
    assert!(
        matches!(&events[3], ClientEvent::RequestDone { id, status: RequestStatus::Accepted } if *id == ticket.id())
    );
    assert_eq!(ticket.status(), RequestStatus::Accepted);
    assert_eq!(slot_runs.get(), 0, "drain runs no slot");
    server.shutdown();
}

#[test]
fn a_ticket_waits_for_its_verdict_and_keeps_the_other_events_for_later() {
    let server = serve();
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    let no = client.request(Chan::Score, Act::Add, &11u32).unwrap();
    let yes = client.request(Chan::Score, Act::Add, &2u32).unwrap();
    assert_eq!(
        no.wait(&mut client, WAIT),
        RequestStatus::Rejected("1 to 10 points".into())
    );
    assert_eq!(yes.wait(&mut client, WAIT), RequestStatus::Accepted);
    let totals: Vec<u32> = client
        .drain()
        .filter_map(|e| match e {
            ClientEvent::Message(m) => m.content().ok(),
            _ => None,
        })
        .collect();
    assert_eq!(totals, [2], "the update waited for the game's drain");
    server.shutdown();
}

#[test]
fn subscriptions_stay_until_disconnected_and_scoped_ones_end_with_their_guard() {
    let server = serve();
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    let (kept, scoped) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let k = kept.clone();
    client.subscribe(Chan::Score, move |_| k.set(k.get() + 1)); // Connection dropped: stays
    let s = scoped.clone();
    let guard = client
        .subscribe(Chan::Score, move |_| s.set(s.get() + 1))
        .scoped();
    let add = |client: &mut NetworkClient| {
        let ticket = client.request(Chan::Score, Act::Add, &1u32).unwrap();
        assert_eq!(ticket.wait(client, WAIT), RequestStatus::Accepted);
        client.poll();
    };
    add(&mut client);
    assert_eq!((kept.get(), scoped.get()), (1, 1));
    drop(guard);
    add(&mut client);
    assert_eq!((kept.get(), scoped.get()), (2, 1));
    server.shutdown();
}

#[tokio::test(flavor = "current_thread")]
async fn the_client_is_a_stream_for_tokio_code() {
    let server = serve();
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    let welcomed = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(ClientEvent::Welcomed(w)) = client.next().await {
                return w;
            }
        }
    })
    .await
    .unwrap();
    assert!(!welcomed.resumed);
    let ticket = client.request(Chan::Score, Act::Add, &5u32).unwrap();
    let verdict = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(ClientEvent::RequestDone { id, status }) = client.next().await {
                return (id, status);
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(verdict, (ticket.id(), RequestStatus::Accepted));
    // The server goes away for good: the stream says why, then ends.
    server.shutdown();
    let ended = tokio::time::timeout(WAIT, async {
        while let Some(event) = client.next().await {
            if let ClientEvent::Disconnected(reason) = event {
                return Some(reason);
            }
        }
        None
    })
    .await
    .unwrap();
    assert!(ended.is_some());
    assert!(
        client.next().await.is_none(),
        "the stream ends with the client"
    );
}
