//! A complete game, server and client, in pull style: `cargo run --example minimal`.
use std::time::Duration;
use switchboard::{Audience, NetworkClient, Outbox, Rejection, Request, ServerManager};
use switchboard::{BindScope, ClientConfig, ClientEvent, ClientId, GameLogic, ManagerConfig};

switchboard::channels! { enum Chan { Score = 16 } }
switchboard::actions! { enum Act { Add = 1, Total = 2 } }

/// The rules: add 1 to 10 points; everyone hears the new total.
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
        let _ = out.send(Audience::All, Chan::Score, Act::Total, &self.0);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = ServerManager::spawn(BindScope::Loopback, 0, ManagerConfig::default(), Score(0))?;
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    for points in [3u32, 50, 7] {
        let ticket = client.request(Chan::Score, Act::Add, &points)?;
        println!(
            "add {points}: {:?}",
            ticket.wait(&mut client, Duration::from_secs(5))
        );
    }
    for event in client.drain_timeout(Duration::from_millis(100)) {
        match event {
            ClientEvent::Welcomed(w) => println!("welcomed as {}", w.client),
            ClientEvent::Message(m) => println!("total is now {}", m.content::<u32>()?),
            _ => {}
        }
    }
    server.shutdown();
    Ok(())
}
