//! A complete game, server and client, in pull style: `cargo run --example minimal`.
use std::time::Duration;
use switchboard::{Audience, NetworkClient, Outbox, Rejection, Request, ServerManager};
use switchboard::{BindScope, ClientConfig, ClientEvent, ClientId, GameLogic, ManagerConfig};

switchboard::channels! { enum Chan { Score = 16 } }
switchboard::actions! { enum Score in Chan::Score { Add(u32) = 1, Total(u32) = 2 } }

/// The rules: add 1 to 10 points; everyone hears the new total.
struct Points(u32);
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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = ServerManager::spawn(BindScope::Loopback, 0, ManagerConfig::default(), Points(0))?;
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    for points in [3, 50, 7] {
        let ticket = client.request(Score::Add(points))?;
        println!(
            "add {points}: {:?}",
            client.wait(ticket, Duration::from_secs(5))
        );
    }
    for event in client.drain_timeout(Duration::from_millis(100)) {
        match event {
            ClientEvent::Welcomed(w) => println!("welcomed as {}", w.client),
            ClientEvent::Message(m) => {
                if let Score::Total(total) = m.typed()? {
                    println!("total is now {total}");
                }
            }
            _ => {}
        }
    }
    server.shutdown();
    Ok(())
}
