//! Single player the Switchboard way: the game starts its own server as a
//! child process (this same executable, re-invoked in server mode), bound to
//! loopback, plays against it, and shuts it down when it quits.
//!
//! ```text
//! cargo run -p switchboard-server --example local_game
//! ```
//!
//! The child's log lines arrive in this process's `tracing` output, marked
//! `switchboard::child`.

use std::time::{Duration, Instant};

use switchboard::{ClientConfig, LocalServer, LocalServerOptions, NetworkClient, RequestStatus};
use switchboard_server::board::{BoardAction, BoardChannel, BoardLogic, SetValue, Snapshot};

/// Sends one request and waits for the server's verdict.
fn order<T: serde::Serialize>(
    client: &mut NetworkClient,
    action: BoardAction,
    content: &T,
) -> Result<(), switchboard::RequestError> {
    let ticket = client.request(BoardChannel::Board, action, content)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ticket.is_done() && Instant::now() < deadline {
        client.poll_timeout(Duration::from_millis(10));
    }
    match ticket.status() {
        RequestStatus::Accepted => println!("{action:?}: accepted"),
        RequestStatus::Rejected(reason) => println!("{action:?}: rejected: {reason}"),
        other => println!("{action:?}: {other:?}"),
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // In the child this call never returns: the process is the server.
    switchboard::process::serve_if_child(BoardLogic::default);

    tracing_subscriber::fmt().with_target(true).init();
    let server = LocalServer::spawn(LocalServerOptions::default())?;
    println!("local server: pid {} on {}", server.pid(), server.addr());

    let mut client = NetworkClient::connect(server.addr(), ClientConfig::named("solo"));
    client.subscribe(BoardChannel::Board, |delivery| {
        if delivery.action() == Some(BoardAction::Snapshot) {
            if let Ok(snapshot) = delivery.content::<Snapshot>() {
                println!(
                    "snapshot: {} keys, seats {:?}",
                    snapshot.board.len(),
                    snapshot.seats.0
                );
            }
        }
    });

    order(&mut client, BoardAction::Claim, &2u8)?;
    order(
        &mut client,
        BoardAction::Set,
        &SetValue {
            key: "level".into(),
            value: "1".into(),
        },
    )?;
    // Invalid on purpose: the server rejects it and says why.
    order(&mut client, BoardAction::Claim, &99u8)?;

    client.close("quitting");
    client.poll_timeout(Duration::from_millis(100));
    let pid = server.pid();
    let status = server.shutdown()?;
    println!("local server {pid} exited: {status}");
    Ok(())
}
