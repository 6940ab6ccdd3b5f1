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
//! The editor's own screen is in `editor::screen`.

use std::collections::VecDeque;
use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;

use crate::client::{lobby_players, Player, Tone};
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

const GAME_KEYS: &str =
    "arrows move · Enter select/order · Tab next unit · c claim · e end turn · s save · q quit";
const LOBBY_KEYS: &str = "0-7 pick a nation · r ready · g start (host) · q quit";

/// What one frame shows.
struct Screen<'a> {
    ui: &'a Ui,
    /// The connection's state in words.
    status: (String, Tone),
    /// Where others join, when this player hosts.
    invite: Option<&'a str>,
    view: Option<&'a NationView>,
    lobby: Option<&'a LobbyView>,
}

impl Screen<'_> {
    fn draw(&self, frame: &mut Frame) {
        let [status, top, bottom] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(10),
            Constraint::Length(8),
        ])
        .areas(frame.area());
        let (text, tone) = &self.status;
        let style = match tone {
            Tone::Good => Style::default().fg(Color::Black).bg(Color::Green),
            Tone::Warning => Style::default().fg(Color::Black).bg(Color::Yellow),
            Tone::Bad => Style::default().fg(Color::White).bg(Color::Red),
        };
        frame.render_widget(
            Paragraph::new(format!(" {} · {text}", self.ui.name)).style(style),
            status,
        );
        let [map_area, side] =
            Layout::horizontal([Constraint::Min(20), Constraint::Length(38)]).areas(top);
        let keys = match self.view.filter(|v| v.you.is_some()) {
            Some(view) => {
                draw_map(frame, map_area, self.ui, view);
                draw_side(frame, side, self.ui, view);
                GAME_KEYS
            }
            None => {
                self.draw_lobby(frame, top);
                LOBBY_KEYS
            }
        };
        let log: Vec<Line> = self
            .ui
            .log
            .iter()
            .rev()
            .take(bottom.height.saturating_sub(2) as usize)
            .rev()
            .map(|l| Line::raw(l.as_str()))
            .collect();
        frame.render_widget(
            Paragraph::new(log)
                .wrap(Wrap { trim: false })
                .block(Block::bordered().title(" log ").title_bottom(keys)),
            bottom,
        );
    }

    fn draw_lobby(&self, frame: &mut Frame, area: Rect) {
        let mut lines = vec![
            Line::raw(format!("{}: waiting for the game to start", self.ui.name)),
            Line::raw(""),
        ];
        if let Some(invite) = self.invite {
            lines.push(Line::styled(
                format!("others join at {invite}"),
                Style::default().add_modifier(Modifier::BOLD),
            ));
        }
        if let Some(lobby) = self.lobby {
            lines.push(Line::raw(format!(
                "host: {}",
                lobby.host.as_deref().unwrap_or("-")
            )));
            lines.push(Line::raw(format!("here: {}", lobby_players(lobby))));
            lines.push(Line::raw(""));
            for seat in &lobby.seats {
                let who = seat.player.as_deref().unwrap_or("(free)");
                let ready = if seat.ready { ", ready" } else { "" };
                lines.push(Line::styled(
                    format!("  {} {}: {who}{ready}", seat.nation.0, seat.name),
                    Style::default().fg(nation_color(seat.nation)),
                ));
            }
        }
        frame.render_widget(
            Paragraph::new(lines)
                .wrap(Wrap { trim: false })
                .block(Block::bordered().title(" lobby ")),
            area,
        );
    }
}

fn draw_map(frame: &mut Frame, area: Rect, ui: &Ui, view: &NationView) {
    let mut lines = Vec::new();
    for y in 0..view.height {
        let mut spans = Vec::new();
        for x in 0..view.width {
            let (text, mut style) = match (view.tile(x, y), view.unit_at(x, y)) {
                (None, _) => ("  ".to_string(), Style::default().bg(Color::Black)),
                (Some(tile), unit) => {
                    let bg = terrain_color(tile.terrain);
                    match unit {
                        Some(unit) => {
                            let style = Style::default()
                                .bg(bg)
                                .fg(nation_color(unit.nation))
                                .add_modifier(Modifier::BOLD);
                            (
                                format!("{}{}", unit_letter(unit.kind), unit.nation.0),
                                style,
                            )
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
    lines.push(Line::raw(""));
    lines.extend(legend());
    let title = format!(" {} — turn {} ", view.scenario, view.turn);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        area,
    );
}

fn terrain_color(terrain: Terrain) -> Color {
    match terrain {
        Terrain::Water => Color::Blue,
        Terrain::Plains => Color::Rgb(60, 90, 40),
        Terrain::Forest => Color::Rgb(20, 70, 20),
        Terrain::Hills => Color::Rgb(110, 90, 50),
        Terrain::Mountains => Color::Gray,
    }
}

fn unit_letter(kind: UnitKind) -> char {
    match kind {
        UnitKind::Infantry => 'I',
        UnitKind::Cavalry => 'C',
    }
}

/// The map's legend: terrain (and what entering it costs), units, owners.
fn legend() -> Vec<Line<'static>> {
    let mut terrain = vec![Span::raw("moves to enter:")];
    for t in [
        Terrain::Plains,
        Terrain::Forest,
        Terrain::Hills,
        Terrain::Mountains,
        Terrain::Water,
    ] {
        let cost = t.cost().map_or("-".to_string(), |c| c.to_string());
        terrain.push(Span::raw(" "));
        terrain.push(Span::styled(
            t.glyph().to_string(),
            Style::default().bg(terrain_color(t)),
        ));
        terrain.push(Span::raw(format!(
            " {} {cost} ",
            format!("{t:?}").to_lowercase()
        )));
    }
    vec![
        Line::from(terrain),
        Line::raw("I3 C3: infantry, cavalry of nation 3 · a b ...: owner (a: nation 0)"),
    ]
}

/// A nation's name as the view tells it.
fn nation_name(view: &NationView, nation: NationId) -> String {
    view.nations
        .iter()
        .find(|n| n.id == nation)
        .map_or_else(|| format!("nation {}", nation.0), |n| n.name.clone())
}

fn draw_side(frame: &mut Frame, area: Rect, ui: &Ui, view: &NationView) {
    let mut lines = Vec::new();
    let you = view
        .you
        .expect("draw shows the map only to a seated player");
    lines.push(Line::styled(
        format!("{} plays {}", ui.name, nation_name(view, you)),
        Style::default()
            .fg(nation_color(you))
            .add_modifier(Modifier::BOLD),
    ));
    if let Some(winner) = view.winner {
        lines.push(Line::styled(
            format!("game over: {} wins", nation_name(view, winner)),
            Style::default().add_modifier(Modifier::BOLD),
        ));
    }
    lines.push(Line::raw(""));
    for n in &view.nations {
        let status = if n.ended { "ended turn" } else { "playing" };
        let ai = if n.ai { ", AI" } else { "" };
        lines.push(Line::styled(
            format!(
                "{} ({}, {}{ai}): {} prov, {status}",
                n.name,
                n.id.0,
                nation_letter(n.id),
                n.provinces
            ),
            Style::default().fg(nation_color(n.id)),
        ));
    }
    lines.push(Line::raw(""));
    let (x, y) = ui.cursor;
    match view.tile(x, y) {
        Some(tile) => {
            let owner = tile.owner.map_or("nobody".into(), |o| nation_name(view, o));
            let cost = tile
                .terrain
                .cost()
                .map_or("impassable".into(), |c| format!("{c} to enter"));
            lines.push(Line::raw(format!("({x}, {y}) {:?}, {cost}", tile.terrain)));
            lines.push(Line::raw(format!("owner: {owner}")));
        }
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
