//! `NetworkClient`'s one event path, over loopback: events pulled with
//! `drain`, awaited as a `Stream`, a ticket waited on; signals and channel
//! subscriptions as adapters on the same path (a game that mixes them loses
//! nothing); subscriptions that stay until disconnected or tied to a scope.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use switchboard::{
    Audience, ClientConfig, ClientEvent, ClientId, GameLogic, NetworkClient, Outbox, Rejection,
    Request, RequestStatus, ServerManager,
};

switchboard::channels! { enum Chan { Score = 16 } }
switchboard::actions! {
    #[derive(Debug, PartialEq)]
    enum Act in Chan::Score { Add(u32) = 1, Total(u32) = 2 }
}

/// Adds 1 to 10 points; everyone hears the total.
struct Score(u32);

impl GameLogic for Score {
    type Message = Act;
    type Command = u32;
    fn validate(&self, request: &Request<Act>) -> Result<u32, Rejection> {
        match request.message {
            Act::Add(n @ 1..=10) => Ok(n),
            _ => Err(Rejection::invalid("1 to 10 points")),
        }
    }
    fn apply(&mut self, _: ClientId, n: u32, out: &mut Outbox) {
        self.0 += n;
        out.send(Audience::All, Act::Total(self.0));
    }
}

const WAIT: Duration = Duration::from_secs(10);

fn serve() -> switchboard::RunningServer<Score> {
    ServerManager::builder(Score(0)).spawn().unwrap()
}

#[test]
fn drain_hands_every_event_over_in_order_and_runs_each_slot_once_as_it_does() {
    let server = serve();
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    let slot_runs = Rc::new(Cell::new(0));
    let runs = slot_runs.clone();
    client.subscribe(Chan::Score, move |_| runs.set(runs.get() + 1));
    let ticket = client.request(Act::Add(4)).unwrap();
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
    assert_eq!(total.typed::<Act>().unwrap(), Act::Total(4));
    assert!(
        matches!(&events[3], ClientEvent::RequestDone { ticket: t, status: RequestStatus::Accepted } if *t == ticket)
    );
    assert_eq!(client.status(ticket), RequestStatus::Accepted);
    assert_eq!(
        slot_runs.get(),
        1,
        "the channel's slot ran once, as drain took the message"
    );
    server.shutdown_blocking().unwrap();
}

#[test]
fn a_ticket_waits_for_its_verdict_and_keeps_the_other_events_for_later() {
    let server = serve();
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    let no = client.request(Act::Add(11)).unwrap();
    let yes = client.request(Act::Add(2)).unwrap();
    assert_eq!(
        client.wait(no, WAIT),
        RequestStatus::Rejected("1 to 10 points".into())
    );
    assert_eq!(client.wait(yes, WAIT), RequestStatus::Accepted);
    let totals: Vec<Act> = client
        .drain()
        .filter_map(|e| match e {
            ClientEvent::Message(m) => m.typed().ok(),
            _ => None,
        })
        .collect();
    assert_eq!(
        totals,
        [Act::Total(2)],
        "the update waited for the game's drain"
    );
    assert_eq!(
        client.status(no),
        RequestStatus::Rejected("1 to 10 points".into())
    );
    server.shutdown_blocking().unwrap();
}

#[test]
fn subscriptions_stay_until_disconnected_and_scoped_ones_end_with_their_guard() {
    let server = serve();
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    let (kept, scoped) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let k = kept.clone();
    client.subscribe(Chan::Score, move |_| k.set(k.get() + 1)); // Slot handle dropped: stays
    let s = scoped.clone();
    let guard = client
        .subscribe(Chan::Score, move |_| s.set(s.get() + 1))
        .scoped();
    let add = |client: &mut NetworkClient| {
        let ticket = client.request(Act::Add(1)).unwrap();
        assert_eq!(client.wait(ticket, WAIT), RequestStatus::Accepted);
        client.poll();
    };
    add(&mut client);
    assert_eq!((kept.get(), scoped.get()), (1, 1));
    drop(guard);
    add(&mut client);
    assert_eq!((kept.get(), scoped.get()), (2, 1));
    server.shutdown_blocking().unwrap();
}

#[test]
fn a_game_that_subscribes_drains_and_polls_in_one_loop_counts_every_message_once_per_consumer() {
    let server = serve();
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    // Three consumers of the same messages: a channel slot, the `received`
    // signal, and the game's own loop (what `drain` hands it).
    let (by_slot, by_signal) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let s = by_slot.clone();
    client.subscribe(Chan::Score, move |_| s.set(s.get() + 1));
    let r = by_signal.clone();
    client
        .signals()
        .received
        .connect(move |_| r.set(r.get() + 1));
    const SENT: u32 = 20;
    let mut tickets = Vec::new();
    let (mut drained, mut polled) = (0, 0);
    let deadline = Instant::now() + WAIT;
    while by_slot.get() < SENT as usize {
        assert!(
            Instant::now() < deadline,
            "slot saw {} of {SENT}",
            by_slot.get()
        );
        if client.is_welcomed() && tickets.len() < SENT as usize {
            tickets.push(client.request(Act::Add(1)).unwrap());
        }
        // Drain every other pass, poll the rest: each event is taken once,
        // by one of them; its slot and signal run either way.
        if tickets.len() % 2 == 0 {
            drained += client
                .drain_timeout(Duration::from_millis(2))
                .filter(|e| matches!(e, ClientEvent::Message(_)))
                .count();
        } else {
            polled += client.poll_timeout(Duration::from_millis(2));
        }
    }
    assert_eq!(
        by_signal.get(),
        SENT as usize,
        "the signal saw each message once"
    );
    assert!(drained > 0 && drained <= SENT as usize, "drained {drained}");
    assert!(polled > 0, "poll took the rest");
    assert!(tickets.iter().all(|t| client.status(*t).is_accepted()));
    server.shutdown_blocking().unwrap();
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
    let ticket = client.request(Act::Add(5)).unwrap();
    let verdict = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(ClientEvent::RequestDone { ticket, status }) = client.next().await {
                return (ticket, status);
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(verdict, (ticket, RequestStatus::Accepted));
    // The server goes away for good, and gives its logic back: the stream
    // says why, then ends.
    let score = server.shutdown().await.unwrap();
    assert_eq!(score.0, 5);
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
