//! The typed interface: orders as lines of text (`--text`, or when stdout
//! is not a terminal), the map and the lobby drawn as text.

use std::sync::mpsc;
use std::time::Duration;

use super::Player;
use crate::protocol::{
    nation_digit, nation_letter, Attack, GameAct, LobbyAct, LobbyView, Move, NationView,
};
use crate::scenario::{NationId, UnitId};

/// Draws a view as text: terrain, owners (letters), units (digits of their
/// nation), fog as blanks.
pub fn render(view: &NationView) -> String {
    let mut out = format!("{} — turn {}", view.scenario, view.turn);
    if let Some(you) = view.you {
        let name = view
            .nations
            .iter()
            .find(|n| n.id == you)
            .map_or("?", |n| n.name.as_str());
        out.push_str(&format!(" — you are {name} ({})", you.0));
    }
    out.push('\n');
    out.push_str("   ");
    for x in 0..view.width {
        out.push(char::from(b'0' + x % 10));
    }
    out.push('\n');
    for y in 0..view.height {
        out.push_str(&format!("{y:2} "));
        for x in 0..view.width {
            let c = match (view.unit_at(x, y), view.tile(x, y)) {
                (Some(unit), _) => nation_digit(unit.nation),
                (None, Some(tile)) => match tile.owner {
                    Some(owner) => nation_letter(owner),
                    None => tile.terrain.glyph(),
                },
                (None, None) => ' ',
            };
            out.push(c);
        }
        out.push('\n');
    }
    for n in &view.nations {
        out.push_str(&format!(
            "  {} {}{}: {} provinces{}\n",
            n.id.0,
            n.name,
            if n.ai { " (AI)" } else { "" },
            n.provinces,
            if n.ended { ", turn ended" } else { "" }
        ));
    }
    for u in view.units.iter().filter(|u| Some(u.nation) == view.you) {
        out.push_str(&format!(
            "  unit {} {:?} at ({}, {}), {} moves left\n",
            u.id.0, u.kind, u.x, u.y, u.moves_left
        ));
    }
    if let Some(winner) = view.winner {
        out.push_str(&format!("  the game is over: nation {} wins\n", winner.0));
    }
    out
}

/// The lobby as text.
pub fn render_lobby(lobby: &LobbyView) -> String {
    let mut out = format!(
        "lobby (host: {}); pick N, ready, and the host starts\n",
        lobby.host.as_deref().unwrap_or("-")
    );
    for seat in &lobby.seats {
        out.push_str(&format!(
            "  {} {}: {}{}\n",
            seat.nation.0,
            seat.name,
            seat.player.as_deref().unwrap_or("(free)"),
            if seat.ready { ", ready" } else { "" }
        ));
    }
    out.push_str(&format!("  here: {}\n", lobby_players(lobby)));
    out
}

/// Everyone who joined, as one line: "ada (Red), bob (no nation yet), cy (away)".
pub(crate) fn lobby_players(lobby: &LobbyView) -> String {
    let names: Vec<String> = lobby
        .players
        .iter()
        .map(|p| {
            let nation = p.nation.map_or("no nation yet".to_string(), |n| {
                let seat = lobby.seats.iter().find(|s| s.nation == n);
                seat.map_or(format!("nation {}", n.0), |s| s.name.clone())
            });
            let away = if p.online { "" } else { ", away" };
            format!("{} ({nation}{away})", p.name)
        })
        .collect();
    if names.is_empty() {
        "nobody".into()
    } else {
        names.join(", ")
    }
}

const HELP: &str =
    "orders: m UNIT X Y (move) | c UNIT (claim) | a UNIT TARGET (attack) | e (end turn)
        save NAME | load NAME | pick NATION | ready | start | map | help | q (quit)";

/// Plays by typed orders until `q` or the end of stdin.
pub(super) fn play(player: &mut Player) -> Result<(), String> {
    println!("{HELP}");
    let (tx, lines) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    loop {
        player.pump_print(Duration::from_millis(20));
        if std::mem::take(&mut player.seen.fresh_lobby) {
            if let Some(lobby) = player.seen.lobby.as_ref().filter(|l| !l.started) {
                print!("{}", render_lobby(lobby));
            }
        }
        if std::mem::take(&mut player.seen.fresh_view) {
            if let Some(view) = player.seen.view.as_ref().filter(|v| v.you.is_some()) {
                print!("{}", render(view));
            }
        }
        if player.client.is_finished() {
            return Err(player.gone());
        }
        let line = match lines.try_recv() {
            Ok(line) => line,
            Err(mpsc::TryRecvError::Empty) => continue,
            Err(mpsc::TryRecvError::Disconnected) => return Ok(()),
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| words.get(i).and_then(|w| w.parse::<u32>().ok());
        match words.as_slice() {
            ["q" | "quit"] => return Ok(()),
            ["help"] => println!("{HELP}"),
            ["map"] => player.seen.fresh_view = true,
            ["m", ..] => match (num(1), num(2), num(3)) {
                (Some(u), Some(x), Some(y)) if x < 256 && y < 256 => {
                    let order = Move {
                        unit: UnitId(u),
                        x: x as u8,
                        y: y as u8,
                    };
                    player.order(line.clone(), GameAct::Move(order));
                }
                _ => println!("m UNIT X Y"),
            },
            ["c", ..] => match num(1) {
                Some(u) => player.order(line.clone(), GameAct::Claim(UnitId(u))),
                None => println!("c UNIT"),
            },
            ["a", ..] => match (num(1), num(2)) {
                (Some(u), Some(t)) => {
                    let order = Attack {
                        unit: UnitId(u),
                        target: UnitId(t),
                    };
                    player.order(line.clone(), GameAct::Attack(order));
                }
                _ => println!("a UNIT TARGET"),
            },
            ["e"] => player.order(line.clone(), GameAct::EndTurn),
            ["save", name] => player.order(line.clone(), GameAct::Save(name.to_string())),
            ["load", name] => player.order(line.clone(), GameAct::Load(name.to_string())),
            ["pick", ..] => match num(1) {
                Some(n) if n < 256 => player.order(line.clone(), LobbyAct::Pick(NationId(n as u8))),
                _ => println!("pick NATION"),
            },
            ["ready"] => player.order(line.clone(), LobbyAct::Ready(true)),
            ["start"] => player.order(line.clone(), LobbyAct::Start),
            [] => {}
            _ => println!("? {HELP}"),
        }
    }
}
