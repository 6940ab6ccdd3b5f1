//! The in-memory harness itself: its clock drives the server's ticks at the
//! logic's own rate, and a zero rate cannot make it spin.

use std::time::{Duration, Instant};

use switchboard::harness::Harness;
use switchboard::manager::ManagerRules;
use switchboard::{ClientId, GameLogic, Outbox, Rejection, Request};

/// Counts its ticks; ticks at `rate` when it has one.
struct Ticker {
    rate: Option<Duration>,
    ticks: Vec<Instant>,
}

impl GameLogic for Ticker {
    type Message = switchboard::Message;
    type Command = ();
    fn validate(&self, _: &Request) -> Result<(), Rejection> {
        Err(Rejection::invalid("nothing to ask"))
    }
    fn apply(&mut self, _: ClientId, _: (), _: &mut Outbox) {}
    fn tick_interval(&self) -> Option<Duration> {
        self.rate
    }
    fn on_tick(&mut self, now: Instant, _: &mut Outbox) {
        self.ticks.push(now);
    }
}

fn ticker(rate: Option<Duration>) -> Harness<Ticker> {
    let rules = ManagerRules {
        tick_interval: Duration::from_millis(250),
        ..ManagerRules::default()
    };
    let ticker = Ticker {
        rate,
        ticks: Vec::new(),
    };
    Harness::new(rules, ticker, Instant::now())
}

#[test]
fn the_server_ticks_at_the_config_rate_unless_the_logic_has_its_own() {
    let mut net = ticker(None);
    net.advance(Duration::from_secs(1));
    assert_eq!(net.logic().ticks.len(), 4);
    let mut net = ticker(Some(Duration::from_millis(50)));
    net.advance(Duration::from_secs(1));
    assert_eq!(net.logic().ticks.len(), 20);
    let gaps: Vec<Duration> = net.logic().ticks.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|g| *g == Duration::from_millis(50)),
        "{gaps:?}"
    );
}

#[test]
fn a_zero_tick_rate_is_held_to_the_minimum_tick() {
    let mut net = ticker(Some(Duration::ZERO));
    net.advance(Duration::from_millis(10));
    assert_eq!(net.logic().ticks.len(), 10, "one tick per millisecond");
}

switchboard::channels! { enum Chan { Count = 16 } }
switchboard::actions! { enum Count in Chan::Count { Add(u32) = 1 } }

/// Adds what it is asked to add.
#[derive(Default)]
struct Counter(u32);

impl GameLogic for Counter {
    type Message = Count;
    type Command = u32;
    fn validate(&self, request: &Request<Count>) -> Result<u32, Rejection> {
        let Count::Add(n) = request.message;
        Ok(n)
    }
    fn apply(&mut self, _: ClientId, n: u32, _: &mut Outbox) {
        self.0 += n;
    }
}

#[test]
fn a_player_behind_a_simulated_network_waits_its_latency_each_way() {
    use switchboard::harness::netsim::NetSimConfig;
    let mut net = Harness::new(ManagerRules::default(), Counter::default(), Instant::now());
    let near = net.join(switchboard::ClientConfig::named("near"));
    assert!(net.client(near).is_welcomed(), "no network: at once");
    let far = net.join(switchboard::ClientConfig::named("far"));
    // The far one's connection is already open; its next messages take
    // 75 ms each way, without jitter or stalls.
    net.set_network(
        far,
        Some(NetSimConfig {
            jitter: Duration::ZERO,
            stall_every: Duration::ZERO,
            ..NetSimConfig::default()
        }),
    );
    let ticket = net.request(far, Count::Add(2)).unwrap();
    assert!(!net.verdict(far, ticket).is_done());
    net.advance(Duration::from_millis(74));
    assert_eq!(net.logic().0, 0, "the request is still on its way");
    net.advance(Duration::from_millis(2));
    assert_eq!(net.logic().0, 2, "applied when it arrived, at 75 ms");
    assert!(
        !net.verdict(far, ticket).is_done(),
        "the verdict on its way back"
    );
    net.advance(Duration::from_millis(75));
    assert!(
        net.verdict(far, ticket).is_accepted(),
        "150 ms: a round trip"
    );
    // The near one is not slowed by it.
    let quick = net.request(near, Count::Add(1)).unwrap();
    assert!(net.verdict(near, quick).is_accepted());
}
