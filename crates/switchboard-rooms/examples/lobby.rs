//! Rooms, lobby, RPC and a replicated entity, in one process.
//!
//! ```text
//! cargo run -p switchboard-rooms --example lobby
//! ```
//!
//! A server runs `RoomsLogic` (no game code). The host creates a room, two
//! players join, everyone gets ready, the host starts; an RPC greets everyone,
//! and the host moves a replicated ball whose position the others see at the
//! sync rate. All slots run on this thread, inside `poll()`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use switchboard::{
    BindScope, ClientConfig, ManagerConfig, RequestStatus, RequestTicket, ServerManager,
};
use switchboard_rooms::{CreateRoom, RoomClient, RoomsLogic, RpcTarget};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The rooms ask for their own 20 Hz tick (GameLogic::tick_interval).
    let config = ManagerConfig::default();
    let server = ServerManager::spawn(BindScope::Loopback, 0, config, RoomsLogic::new())?;
    let mut players: Vec<RoomClient> = ["host", "ann", "bob"]
        .iter()
        .map(|name| RoomClient::connect(server.local_addr(), ClientConfig::named(*name)))
        .collect();
    for (i, name) in ["host", "ann", "bob"].iter().enumerate() {
        let me = name.to_string();
        players[i].register_rpc("greet", move |_, text: String| {
            println!("[{me}] rpc greet: {text}")
        });
        let me = name.to_string();
        players[i]
            .signals()
            .player_joined
            .connect(move |p| println!("[{me}] {} joined", p.name));
        let me = name.to_string();
        players[i]
            .signals()
            .game_started
            .connect(move |_| println!("[{me}] the game starts"));
    }
    let seen: Rc<RefCell<Vec<(f32, f32)>>> = Rc::default();
    let s = seen.clone();
    players[2].signals().state_updated.connect(move |updates| {
        for update in updates {
            if let Ok(pos) = update.value::<(f32, f32)>() {
                println!("[bob] ball at ({:.1}, {:.1})", pos.0, pos.1);
                s.borrow_mut().push(pos);
            }
        }
    });

    let room = CreateRoom {
        name: "friday".into(),
        max_players: 4,
        metadata: BTreeMap::new(),
        private: false,
    };
    let ticket = players[0].create(&room)?;
    settle(&mut players, &ticket)?;
    let id = players[0].room().ok_or("no room")?.id;
    for i in 1..3 {
        let ticket = players[i].join(id)?;
        settle(&mut players, &ticket)?;
    }
    for i in 0..3 {
        let ticket = players[i].set_ready(true)?;
        settle(&mut players, &ticket)?;
    }
    let ticket = players[0].start()?;
    settle(&mut players, &ticket)?;
    let ticket = players[0].call(RpcTarget::All, "greet", "welcome, everyone")?;
    settle(&mut players, &ticket)?;

    let ticket = players[0].spawn("ball", &(0.0f32, 0.0f32))?;
    settle(&mut players, &ticket)?;
    let ball = players[0].room().ok_or("no room")?.entities[0].id;
    // The host moves the ball every frame for half a second; the others get
    // changed-only syncs at 20 Hz, not every move.
    let start = Instant::now();
    let mut moves = 0;
    while start.elapsed() < Duration::from_millis(500) {
        let t = start.elapsed().as_secs_f32();
        players[0].update(ball, &(t * 10.0, t * 5.0))?;
        moves += 1;
        for p in players.iter_mut() {
            p.poll_timeout(Duration::from_millis(5));
        }
    }
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        for p in players.iter_mut() {
            p.poll_timeout(Duration::from_millis(5));
        }
    }
    println!(
        "the host sent {moves} moves; bob received {} syncs",
        seen.borrow().len()
    );
    server.shutdown();
    Ok(())
}

/// Polls everyone until `ticket` has its verdict.
fn settle(
    players: &mut [RoomClient],
    ticket: &RequestTicket,
) -> Result<(), Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ticket.is_done() {
        if Instant::now() > deadline {
            return Err("no answer from the server".into());
        }
        for p in players.iter_mut() {
            p.poll_timeout(Duration::from_millis(2));
        }
    }
    match ticket.status() {
        RequestStatus::Accepted => Ok(()),
        other => Err(format!("refused: {other:?}").into()),
    }
}
