//! The scripted bot player, for demos and tests: it takes a seat, and
//! plays its turns by a simple rule.

use std::time::{Duration, Instant};

use super::{render, Player};
use crate::protocol::{GameAct, LobbyAct, Move, NationView};

/// The scripted player: every turn, each unit claims the province it stands
/// on or steps toward land it does not own; then it ends the turn.
pub(super) fn play(player: &mut Player, turns: u32, players: usize) -> Result<(), String> {
    bot_lobby(player, players)?;
    let started = wait_for_view(player, |_| true)?.turn;
    for _ in 0..turns {
        let view = wait_for_view(player, |_| true)?;
        if view.winner.is_some() {
            println!("game over at turn {}", view.turn);
            break;
        }
        let Some(me) = view.you else {
            return Err("no nation to play".into());
        };
        for unit in view.units.iter().filter(|u| u.nation == me) {
            let here = view.tile(unit.x, unit.y).and_then(|t| t.owner);
            if here != Some(me) {
                player.order(
                    format!("claim with unit {}", unit.id.0),
                    GameAct::Claim(unit.id),
                );
                continue;
            }
            let step = [(1i16, 0i16), (0, 1), (-1, 0), (0, -1)]
                .into_iter()
                .find_map(|(dx, dy)| {
                    let (x, y) = (unit.x as i16 + dx, unit.y as i16 + dy);
                    let (x, y) = (u8::try_from(x).ok()?, u8::try_from(y).ok()?);
                    let tile = view.tile(x, y)?;
                    (tile.terrain.cost().is_some_and(|c| c <= unit.moves_left)
                        && view.unit_at(x, y).is_none()
                        && tile.owner != Some(me))
                    .then_some((x, y))
                });
            if let Some((x, y)) = step {
                let order = Move {
                    unit: unit.id,
                    x,
                    y,
                };
                player.order(
                    format!("move unit {} to ({x}, {y})", unit.id.0),
                    GameAct::Move(order),
                );
            }
        }
        player.order("end turn".into(), GameAct::EndTurn);
        let turn = view.turn;
        let next = wait_for_view(player, |v| v.turn > turn || v.winner.is_some())?;
        let mine = next
            .nations
            .iter()
            .find(|n| Some(n.id) == next.you)
            .map_or(0, |n| n.provinces);
        println!("turn {} done: {} provinces", turn, mine);
    }
    let view = wait_for_view(player, |_| true)?;
    println!("bot finished at turn {} (started at {started})", view.turn);
    print!("{}", render(&view));
    Ok(())
}

/// In a hosted game's lobby: take the first free seat, get ready, and start
/// the game when this bot is the host and `players` seated players are ready.
fn bot_lobby(player: &mut Player, players: usize) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut picked = false;
    loop {
        player.pump_print(Duration::from_millis(10));
        let (view, lobby) = {
            let seen = &player.seen;
            (seen.view.clone(), seen.lobby.clone())
        };
        if view.as_ref().is_some_and(|v| v.you.is_some()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("the game did not start in 15 s".into());
        }
        let Some(lobby) = lobby else { continue };
        if lobby.started {
            return Err("the game started without a seat for this bot".into());
        }
        if !picked {
            let Some(seat) = lobby.seats.iter().find(|s| s.player.is_none()) else {
                return Err("no free seat".into());
            };
            player.order(format!("pick {}", seat.name), LobbyAct::Pick(seat.nation));
            player.order("ready".into(), LobbyAct::Ready(true));
            picked = true;
        }
        let seated: Vec<_> = lobby.seats.iter().filter(|s| s.player.is_some()).collect();
        let all_ready = seated.len() >= players.max(1) && seated.iter().all(|s| s.ready);
        let host = lobby.host.as_deref() == Some(player.name.as_str());
        if all_ready && host && player.pending_is_empty() {
            player.order("start".into(), LobbyAct::Start);
        }
    }
}

fn wait_for_view(
    player: &mut Player,
    ready: impl Fn(&NationView) -> bool,
) -> Result<NationView, String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        player.pump_print(Duration::from_millis(10));
        if let Some(view) = player.seen.view.as_ref().filter(|v| ready(v)) {
            if player.pending.is_empty() {
                return Ok(view.clone());
            }
        }
        if player.client.is_finished() {
            return Err(player.gone());
        }
        if Instant::now() > deadline {
            return Err("no update from the server in 15 s".into());
        }
    }
}
