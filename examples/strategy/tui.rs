//! The full-screen terminal interface: a status line (the connection, with
//! the countdown to the next reconnect attempt), the map with a cursor and a
//! legend, the selected unit, the nations and the turn, and a log pane of
//! events, results and rejections. Nothing is printed over it: every
//! message goes to the log.
//!
//! Keys: arrows or h j k l move the cursor; Enter selects your unit under
//! the cursor, or orders the selected unit to the square under the cursor
//! (move, or attack an enemy there); Tab selects your next unit with moves
//! left; c claims, e ends the turn, s saves as `quicksave`; in the lobby 0-7
//! pick a nation, r toggles ready, g starts (host); q quits.
//!
//! What a frame shows is drawn in `tui/draw.rs`; the editor's own screen is
//! in `editor::screen`.

mod draw;

use std::collections::VecDeque;
use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::style::Color;

use crate::client::Player;
use crate::protocol::{Attack, GameAct, LobbyAct, Move, NationView};
use crate::scenario::{NationId, UnitId};
use draw::Screen;

const NATION_COLORS: [Color; 8] = [
    Color::Red,
    Color::Blue,
    Color::Green,
    Color::Yellow,
    Color::Magenta,
    Color::Cyan,
    Color::White,
    Color::LightRed,
];
const LOG_LINES: usize = 200;

/// The colour of a nation on every screen.
pub(crate) fn nation_color(nation: NationId) -> Color {
    NATION_COLORS[nation.0 as usize % NATION_COLORS.len()]
}

struct Ui {
    name: String,
    cursor: (u8, u8),
    selected: Option<UnitId>,
    log: VecDeque<String>,
    ready: bool,
    centered: bool,
}

/// Runs the full-screen interface until the player quits. When the game
/// ends without the player's say (the server is gone for good), the screen
/// stays, saying why, until q; the reason is the error.
pub(crate) fn run(player: &mut Player) -> Result<(), String> {
    let mut terminal = ratatui::init();
    let name = player.name.clone();
    let mut ui = Ui {
        name: name.clone(),
        cursor: (0, 0),
        selected: None,
        log: VecDeque::new(),
        ready: false,
        centered: false,
    };
    ui.note(format!("joined as {name}; q quits"));
    let result = loop {
        for line in player.pump(Duration::from_millis(5)) {
            ui.note(line);
        }
        let (view, lobby) = {
            let seen = &player.seen;
            (seen.view.clone(), seen.lobby.clone())
        };
        if let Some(view) = &view {
            ui.follow(view);
        }
        let screen = Screen {
            ui: &ui,
            status: player.status(),
            invite: player.invite.as_deref(),
            internet: &player.internet,
            view: view.as_ref(),
            lobby: lobby.as_ref(),
        };
        if let Err(err) = terminal.draw(|frame| screen.draw(frame)) {
            break Err(format!("cannot draw: {err}"));
        }
        match event::poll(Duration::from_millis(30)) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(err) => break Err(format!("terminal input: {err}")),
        }
        let key = match event::read() {
            Ok(Event::Key(key)) if key.kind == KeyEventKind::Press => key.code,
            Ok(_) => continue,
            Err(err) => break Err(format!("terminal input: {err}")),
        };
        if matches!(key, KeyCode::Char('q') | KeyCode::Esc) {
            break match player.link.gone() {
                Some(why) => Err(why.to_string()),
                None => Ok(()),
            };
        }
        ui.key(key, player, view.as_ref());
    };
    ratatui::restore();
    result
}

impl Ui {
    fn note(&mut self, line: String) {
        if self.log.len() == LOG_LINES {
            self.log.pop_front();
        }
        self.log.push_back(line);
    }

    /// Puts the cursor on one of our units the first time we see the map,
    /// and forgets a selected unit that no longer exists.
    fn follow(&mut self, view: &NationView) {
        if !self.centered {
            if let Some(unit) = view.units.iter().find(|u| Some(u.nation) == view.you) {
                self.cursor = (unit.x, unit.y);
                self.centered = true;
            }
        }
        if self
            .selected
            .is_some_and(|id| !view.units.iter().any(|u| u.id == id))
        {
            self.selected = None;
        }
        self.cursor = (
            self.cursor.0.min(view.width - 1),
            self.cursor.1.min(view.height - 1),
        );
    }

    fn key(&mut self, key: KeyCode, player: &mut Player, view: Option<&NationView>) {
        let (w, h) = view.map_or((1, 1), |v| (v.width, v.height));
        let (x, y) = self.cursor;
        match key {
            KeyCode::Left | KeyCode::Char('h') => self.cursor.0 = x.saturating_sub(1),
            KeyCode::Right | KeyCode::Char('l') => self.cursor.0 = (x + 1).min(w - 1),
            KeyCode::Up | KeyCode::Char('k') => self.cursor.1 = y.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => self.cursor.1 = (y + 1).min(h - 1),
            KeyCode::Tab => {
                if let Some(view) = view {
                    let mine: Vec<_> = view
                        .units
                        .iter()
                        .filter(|u| Some(u.nation) == view.you && u.moves_left > 0)
                        .collect();
                    let next = mine
                        .iter()
                        .position(|u| Some(u.id) == self.selected)
                        .map_or(0, |i| (i + 1) % mine.len().max(1));
                    if let Some(unit) = mine.get(next) {
                        self.selected = Some(unit.id);
                        self.cursor = (unit.x, unit.y);
                    }
                }
            }
            KeyCode::Enter | KeyCode::Char(' ') => self.act(player, view),
            KeyCode::Char('c') => match self.selected {
                Some(unit) => {
                    player.order(format!("claim with unit {}", unit.0), GameAct::Claim(unit))
                }
                None => self.note("select a unit first (Enter on it, or Tab)".into()),
            },
            KeyCode::Char('e') => player.order("end turn".into(), GameAct::EndTurn),
            KeyCode::Char('s') => {
                player.order("save".into(), GameAct::Save("quicksave".to_string()))
            }
            KeyCode::Char(digit @ '0'..='7') => {
                let nation = NationId(digit as u8 - b'0');
                player.order(format!("pick nation {}", nation.0), LobbyAct::Pick(nation));
            }
            KeyCode::Char('r') => {
                self.ready = !self.ready;
                player.order(
                    format!("ready: {}", self.ready),
                    LobbyAct::Ready(self.ready),
                );
            }
            KeyCode::Char('g') => player.order("start".into(), LobbyAct::Start),
            _ => {}
        }
    }

    /// Enter: select our unit under the cursor, or order the selected one.
    fn act(&mut self, player: &mut Player, view: Option<&NationView>) {
        let Some(view) = view else { return };
        let (x, y) = self.cursor;
        let here = view.unit_at(x, y);
        if let Some(unit) = here.filter(|u| Some(u.nation) == view.you) {
            self.selected = Some(unit.id);
            return;
        }
        let Some(selected) = self.selected else {
            self.note("no unit of yours here; Tab selects one".into());
            return;
        };
        match here {
            Some(enemy) => {
                let attack = Attack {
                    unit: selected,
                    target: enemy.id,
                };
                player.order(
                    format!("unit {} attacks unit {}", selected.0, enemy.id.0),
                    GameAct::Attack(attack),
                );
            }
            None => {
                let order = Move {
                    unit: selected,
                    x,
                    y,
                };
                player.order(
                    format!("unit {} to ({x}, {y})", selected.0),
                    GameAct::Move(order),
                );
            }
        }
    }
}
