//! The full-screen terminal interface: the map with a cursor, the selected
//! unit, the nations and the turn, and a log of events, results and
//! rejections.
//!
//! Keys: arrows or h j k l move the cursor; Enter selects your unit under
//! the cursor, or orders the selected unit to the square under the cursor
//! (move, or attack an enemy there); Tab selects your next unit with moves
//! left; c claims, e ends the turn, s saves as `quicksave`; in the lobby 0-7
//! pick a nation, r toggles ready, g starts (host); q quits.
//!
//! The editor's own screen is in `editor::screen`.

use std::collections::VecDeque;
use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;

use crate::client::Player;
use crate::protocol::{nation_letter, Attack, GameAct, LobbyAct, LobbyView, Move, NationView};
use crate::scenario::{NationId, Terrain, UnitId, UnitKind};

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

/// Runs the full-screen interface until the player quits.
pub(crate) fn run(player: &mut Player, name: &str) -> Result<(), String> {
    let mut terminal = ratatui::init();
    let mut ui = Ui {
        name: name.to_string(),
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
        if let Err(err) = terminal.draw(|frame| draw(frame, &ui, view.as_ref(), lobby.as_ref())) {
            break Err(format!("cannot draw: {err}"));
        }
        if player.client.is_finished() {
            break Err("the connection to the server is gone".into());
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
            break Ok(());
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

fn draw(frame: &mut Frame, ui: &Ui, view: Option<&NationView>, lobby: Option<&LobbyView>) {
    let [top, bottom] =
        Layout::vertical([Constraint::Min(10), Constraint::Length(9)]).areas(frame.area());
    let [map_area, side] =
        Layout::horizontal([Constraint::Min(20), Constraint::Length(38)]).areas(top);
    match view.filter(|v| v.you.is_some()) {
        Some(view) => {
            draw_map(frame, map_area, ui, view);
            draw_side(frame, side, ui, view);
        }
        None => draw_lobby(frame, top, ui, lobby),
    }
    let log: Vec<Line> = ui
        .log
        .iter()
        .rev()
        .take(bottom.height.saturating_sub(3) as usize)
        .rev()
        .map(|l| Line::raw(l.as_str()))
        .collect();
    let help =
        "arrows move · Enter select/order · Tab next unit · c claim · e end turn · s save · q quit";
    frame.render_widget(
        Paragraph::new(log)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(" log ").title_bottom(help)),
        bottom,
    );
}

fn draw_map(frame: &mut Frame, area: Rect, ui: &Ui, view: &NationView) {
    let mut lines = Vec::new();
    for y in 0..view.height {
        let mut spans = Vec::new();
        for x in 0..view.width {
            let (text, mut style) = match (view.tile(x, y), view.unit_at(x, y)) {
                (None, _) => ("  ".to_string(), Style::default().bg(Color::Black)),
                (Some(tile), unit) => {
                    let bg = match tile.terrain {
                        Terrain::Water => Color::Blue,
                        Terrain::Plains => Color::Rgb(60, 90, 40),
                        Terrain::Forest => Color::Rgb(20, 70, 20),
                        Terrain::Hills => Color::Rgb(110, 90, 50),
                        Terrain::Mountains => Color::Gray,
                    };
                    match unit {
                        Some(unit) => {
                            let kind = if unit.kind == UnitKind::Infantry {
                                'I'
                            } else {
                                'C'
                            };
                            let style = Style::default()
                                .bg(bg)
                                .fg(nation_color(unit.nation))
                                .add_modifier(Modifier::BOLD);
                            (format!("{kind}{}", unit.nation.0), style)
                        }
                        None => {
                            let owner = tile.owner.map_or(' ', nation_letter);
                            let fg = tile.owner.map_or(Color::White, nation_color);
                            (
                                format!("{}{owner}", tile.terrain.glyph()),
                                Style::default().bg(bg).fg(fg),
                            )
                        }
                    }
                }
            };
            if (x, y) == ui.cursor {
                style = style.add_modifier(Modifier::REVERSED);
            }
            if view
                .unit_at(x, y)
                .is_some_and(|u| Some(u.id) == ui.selected)
            {
                style = style.add_modifier(Modifier::UNDERLINED);
            }
            spans.push(Span::styled(text, style));
        }
        lines.push(Line::from(spans));
    }
    let title = format!(" {} — turn {} ", view.scenario, view.turn);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        area,
    );
}

fn draw_side(frame: &mut Frame, area: Rect, ui: &Ui, view: &NationView) {
    let mut lines = Vec::new();
    let you = view
        .you
        .expect("draw shows the map only to a seated player");
    let name = view
        .nations
        .iter()
        .find(|n| n.id == you)
        .map_or("?", |n| n.name.as_str());
    lines.push(Line::styled(
        format!("{} plays {name}", ui.name),
        Style::default()
            .fg(nation_color(you))
            .add_modifier(Modifier::BOLD),
    ));
    if let Some(winner) = view.winner {
        lines.push(Line::styled(
            format!("game over: nation {} wins", winner.0),
            Style::default().add_modifier(Modifier::BOLD),
        ));
    }
    lines.push(Line::raw(""));
    for n in &view.nations {
        let status = if n.ended { "ended turn" } else { "playing" };
        let ai = if n.ai { " (AI)" } else { "" };
        lines.push(Line::styled(
            format!("{} {}{ai}: {} prov, {status}", n.id.0, n.name, n.provinces),
            Style::default().fg(nation_color(n.id)),
        ));
    }
    lines.push(Line::raw(""));
    let (x, y) = ui.cursor;
    match view.tile(x, y) {
        Some(tile) => lines.push(Line::raw(format!(
            "({x}, {y}) {:?}, owner {}",
            tile.terrain,
            tile.owner.map_or("none".into(), |o| o.0.to_string())
        ))),
        None => lines.push(Line::raw(format!("({x}, {y}) in the fog"))),
    }
    match ui
        .selected
        .and_then(|id| view.units.iter().find(|u| u.id == id))
    {
        Some(u) => lines.push(Line::raw(format!(
            "selected: unit {} {:?} at ({}, {}), {} moves",
            u.id.0, u.kind, u.x, u.y, u.moves_left
        ))),
        None => lines.push(Line::raw("selected: none (Tab)")),
    }
    lines.push(Line::raw(""));
    for u in view.units.iter().filter(|u| u.nation == you) {
        lines.push(Line::raw(format!(
            "unit {} {:?} ({}, {}) {} mv",
            u.id.0, u.kind, u.x, u.y, u.moves_left
        )));
    }
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: true })
            .block(Block::bordered().title(" nations ")),
        area,
    );
}

fn draw_lobby(frame: &mut Frame, area: Rect, ui: &Ui, lobby: Option<&LobbyView>) {
    let mut lines = vec![
        Line::raw(format!("{}: waiting for the game to start", ui.name)),
        Line::raw(""),
    ];
    if let Some(lobby) = lobby {
        lines.push(Line::raw(format!(
            "host: {}",
            lobby.host.as_deref().unwrap_or("-")
        )));
        for seat in &lobby.seats {
            let who = seat.player.as_deref().unwrap_or("(free)");
            let ready = if seat.ready { ", ready" } else { "" };
            lines.push(Line::styled(
                format!("  {} {}: {who}{ready}", seat.nation.0, seat.name),
                Style::default().fg(nation_color(seat.nation)),
            ));
        }
        lines.push(Line::raw(""));
        lines.push(Line::raw("0-7 pick a nation · r ready · g start (host)"));
    }
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" lobby ")),
        area,
    );
}
