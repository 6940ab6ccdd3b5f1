//! Rooms, lobby, RPC and a replicated entity, in one process.
//!
//! ```text
//! cargo run -p switchboard-rooms --example lobby
//! ```
//!
//! A server runs `RoomsLogic` (no game code). The host creates a room, two
//! players join, everyone gets ready, the host starts; an RPC greets everyone,
//! and the host moves a replicated ball whose position the others see at the
//! sync rate. Each player's loop pulls its events with `drain()`; the RPC
//! handlers it registered run as the events are taken, on this thread.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use switchboard::{ClientConfig, ManagerConfig, RequestTicket, ServerManager};
use switchboard_rooms::{
    CreateRoom, RoomClient, RoomClientEvent, RoomEvent, RoomsLogic, RpcTarget,
};

const NAMES: [&str; 3] = ["host", "ann", "bob"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The rooms ask for their own 20 Hz tick (GameLogic::tick_interval).
    let config = ManagerConfig::default();
    let server = ServerManager::builder(RoomsLogic::new())
        .config(config)
        .spawn()?;
    let mut players: Vec<RoomClient> = NAMES
        .iter()
        .map(|name| RoomClient::connect(server.local_addr(), ClientConfig::named(*name)))
        .collect();
    for (player, name) in players.iter_mut().zip(NAMES) {
        player.register_rpc("greet", move |_, text: String| {
            println!("[{name}] rpc greet: {text}")
        });
    }

    let room = CreateRoom {
        name: "friday".into(),
        max_players: 4,
        metadata: BTreeMap::new(),
        private: false,
    };
    let ticket = players[0].create(&room)?;
    settle(&mut players, 0, ticket)?;
    let id = players[0].room().ok_or("no room")?.id;
    for i in 1..3 {
        let ticket = players[i].join(id)?;
        settle(&mut players, i, ticket)?;
    }
    for i in 0..3 {
        let ticket = players[i].set_ready(true)?;
        settle(&mut players, i, ticket)?;
    }
    let ticket = players[0].start()?;
    settle(&mut players, 0, ticket)?;
    let ticket = players[0].call(RpcTarget::All, "greet", "welcome, everyone")?;
    settle(&mut players, 0, ticket)?;

    let ticket = players[0].spawn("ball", &(0.0f32, 0.0f32))?;
    settle(&mut players, 0, ticket)?;
    let ball = players[0].room().ok_or("no room")?.entities[0].id;
    // The host moves the ball every frame for half a second; the others get
    // changed-only syncs at 20 Hz, not every move.
    let start = Instant::now();
    let (mut moves, mut syncs) = (0, 0);
    while start.elapsed() < Duration::from_millis(800) {
        let t = start.elapsed().as_secs_f32();
        if start.elapsed() < Duration::from_millis(500) {
            players[0].update(ball, &(t * 10.0, t * 5.0))?;
            moves += 1;
        }
        syncs += frame(&mut players, Duration::from_millis(5));
    }
    println!("the host sent {moves} moves; bob received {syncs} syncs");
    server.shutdown_blocking()?;
    Ok(())
}

/// One frame of every player: takes its events, prints what it heard, and
/// returns how many ball positions bob received.
fn frame(players: &mut [RoomClient], wait: Duration) -> usize {
    let mut syncs = 0;
    for (player, name) in players.iter_mut().zip(NAMES) {
        for event in player.drain_timeout(wait) {
            let RoomClientEvent::Room(event) = event else {
                continue;
            };
            match event {
                RoomEvent::PlayerJoined(p) => println!("[{name}] {} joined", p.name),
                RoomEvent::Started => println!("[{name}] the game starts"),
                RoomEvent::StateUpdate(sync) if name == "bob" => {
                    for pos in sync
                        .updates
                        .iter()
                        .filter_map(|u| u.value::<(f32, f32)>().ok())
                    {
                        println!("[bob] ball at ({:.1}, {:.1})", pos.0, pos.1);
                        syncs += 1;
                    }
                }
                _ => {}
            }
        }
    }
    syncs
}

/// Runs everyone's frames until player `who`'s `ticket` has its verdict.
fn settle(
    players: &mut [RoomClient],
    who: usize,
    ticket: RequestTicket,
) -> Result<(), Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !players[who].status(ticket).is_done() {
        if Instant::now() > deadline {
            return Err("no answer from the server".into());
        }
        frame(players, Duration::from_millis(2));
    }
    match players[who].status(ticket) {
        switchboard::RequestStatus::Accepted => Ok(()),
        other => Err(format!("refused: {other:?}").into()),
    }
}
