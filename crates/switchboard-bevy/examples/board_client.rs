//! A headless Bevy client that plays `switchboard-server`'s board game:
//! it takes the first free seat (a taken seat is refused with the reason,
//! and it tries the next), writes its name on the board, says hello, and
//! prints what the server tells it, as a game's systems would.
//!
//! ```text
//! cargo run -p switchboard-server -- --port 7000
//! cargo run -p switchboard-bevy --example board_client -- 127.0.0.1:7000 ann
//! ```

use std::time::Duration;

use bevy_app::prelude::*;
use bevy_app::ScheduleRunnerPlugin;
use bevy_ecs::prelude::*;
use bevy_state::prelude::*;
use switchboard::client::{RequestStatus, RequestTicket};
use switchboard::ClientConfig;
use switchboard_bevy::prelude::*;
use switchboard_server::board::{Board, SetValue};

/// What the player is doing.
#[derive(Resource, Default)]
struct Play {
    name: String,
    /// The seat asked for, and the request.
    claim: Option<(u8, RequestTicket)>,
    /// The last two requests: the board entry and the greeting.
    rest: Vec<RequestTicket>,
}

fn main() -> AppExit {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7000".into());
    let name = args.next().unwrap_or_else(|| "bevy".into());
    App::new()
        .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::from_secs_f64(
            1.0 / 60.0,
        )))
        .add_plugins(SwitchboardPlugin::connect(
            &addr,
            ClientConfig::named(&name),
        ))
        .receive::<Board>()
        .insert_resource(Play {
            name,
            ..Play::default()
        })
        .add_systems(OnEnter(NetworkState::Online), sit_down)
        .add_systems(Update, (verdicts, updates, gone))
        .run()
}

/// On joining (and on coming back), take a seat.
fn sit_down(mut net: NonSendMut<Switchboard>, mut play: ResMut<Play>) {
    if play.claim.is_none() {
        claim(&mut net, &mut play, 1);
    }
}

fn claim(net: &mut Switchboard, play: &mut Play, seat: u8) {
    match net.request(Board::Claim(seat)) {
        Ok(ticket) => play.claim = Some((seat, ticket)),
        Err(err) => eprintln!("cannot ask for seat {seat}: {err}"),
    }
}

fn verdicts(
    mut events: MessageReader<SwitchboardEvent>,
    mut net: NonSendMut<Switchboard>,
    mut play: ResMut<Play>,
    mut exit: MessageWriter<AppExit>,
) {
    for (ticket, status) in events.read().filter_map(SwitchboardEvent::verdict) {
        if let Some((seat, asked)) = play.claim {
            if asked == ticket {
                match status {
                    RequestStatus::Accepted => {
                        println!("seat {seat}: mine");
                        let entry = Board::Set(SetValue {
                            key: format!("seat_{seat}"),
                            value: play.name.clone(),
                        });
                        let hello = Board::Say(format!("{} sits at {seat}", play.name));
                        play.rest = [entry, hello]
                            .into_iter()
                            .filter_map(|m| net.request(m).ok())
                            .collect();
                    }
                    RequestStatus::Rejected(why) if seat < 8 => {
                        println!("seat {seat}: {why}");
                        claim(&mut net, &mut play, seat + 1);
                    }
                    other => {
                        println!("no seat: {other:?}");
                        exit.write(AppExit::error());
                    }
                }
                continue;
            }
        }
        if let Some(at) = play.rest.iter().position(|t| *t == ticket) {
            play.rest.remove(at);
            println!("{status:?}");
            if play.rest.is_empty() {
                exit.write(AppExit::Success);
            }
        }
    }
}

/// What the server tells every player.
fn updates(mut received: MessageReader<Received<Board>>) {
    for Received(update) in received.read() {
        match update {
            Board::Line(line) => println!("{}: {}", line.name, line.text),
            Board::Changed(changed) => println!("board: {} = {}", changed.key, changed.value),
            Board::Seats(seats) => println!("seats taken: {:?}", seats.0.keys()),
            Board::Snapshot(_) => println!("the whole board arrived"),
            Board::Presence(p) => println!("{} is {}", p.name, p.status),
            _ => {}
        }
    }
}

fn gone(state: Res<State<NetworkState>>, mut exit: MessageWriter<AppExit>) {
    if *state.get() == NetworkState::Disconnected {
        eprintln!("disconnected");
        exit.write(AppExit::error());
    }
}
