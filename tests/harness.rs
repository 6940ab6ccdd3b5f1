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
