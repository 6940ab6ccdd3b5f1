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

use std::time::Duration;

use switchboard::message::TypedMessage;
use switchboard::{ClientConfig, LocalServer, LocalServerOptions, NetworkClient, RequestStatus};
use switchboard_server::board::{Board, BoardChannel, BoardLogic, SetValue};

/// Sends one request and waits for the server's verdict.
fn order(client: &mut NetworkClient, request: Board) -> Result<(), switchboard::RequestError> {
    let action = request.action_name();
    let ticket = client.request(request)?;
    match client.wait(ticket, Duration::from_secs(10)) {
        RequestStatus::Accepted => println!("{action}: accepted"),
        RequestStatus::Rejected(reason) => println!("{action}: rejected: {reason}"),
        other => println!("{action}: {other:?}"),
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
        if let Ok(Board::Snapshot(snapshot)) = delivery.typed() {
            println!(
                "snapshot: {} keys, seats {:?}",
                snapshot.board.len(),
                snapshot.seats.0
            );
        }
    });

    order(&mut client, Board::Claim(2u8))?;
    order(
        &mut client,
        Board::Set(SetValue {
            key: "level".into(),
            value: "1".into(),
        }),
    )?;
    // Invalid on purpose: the server rejects it and says why.
    order(&mut client, Board::Claim(99u8))?;

    client.close("quitting");
    client.poll_timeout(Duration::from_millis(100));
    let pid = server.pid();
    let status = server.shutdown()?;
    println!("local server {pid} exited: {status}");
    Ok(())
}
