//! A complete game, server and client: `cargo run --example minimal`.
use switchboard::prelude::*;

channels! { enum Chan { Score = 16 } }
actions! { #[derive(Debug)] enum Score in Chan::Score { Add(u32) = 1, Total(u32) = 2 } }
const WAIT: Duration = Duration::from_secs(2);

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
    let server = ServerManager::builder(Points(0)).spawn()?;
    let mut client = NetworkClient::connect(server.local_addr(), ClientConfig::named("ann"));
    // A slot on the score channel: it runs as the game takes each update.
    client.subscribe(Chan::Score, |u| println!("{:?}", u.typed::<Score>()));
    for points in [3, 50, 7] {
        let ticket = client.request(Score::Add(points))?;
        println!("add {points}: {:?}", client.wait(ticket, WAIT));
    }
    client.poll_timeout(WAIT / 20);
    println!("final: {} points", server.shutdown_blocking()?.0);
    Ok(())
}
