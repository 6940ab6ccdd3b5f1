//! Drawing one frame of the game screen: the status line, the lobby or the
//! map (with its legend) and the side panel, and the log pane.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;

use super::{nation_color, Ui};
use crate::client::{lobby_players, Tone};
use crate::protocol::{nation_letter, LobbyView, NationView};
use crate::scenario::{NationId, Terrain, UnitKind};

const GAME_KEYS: &str =
    "arrows move · Enter select/order · Tab next unit · c claim · e end turn · s save · q quit";
const LOBBY_KEYS: &str = "0-7 pick a nation · r ready · g start (host) · q quit";

/// What one frame shows.
pub(super) struct Screen<'a> {
    pub(super) ui: &'a Ui,
    /// The connection's state in words.
    pub(super) status: (String, Tone),
    /// Where others join, when this player hosts.
    pub(super) invite: Option<&'a str>,
    /// Where players on the internet join: the router's port mapping and
    /// the join-code relay, the latest news of each.
    pub(super) internet: &'a [String],
    pub(super) view: Option<&'a NationView>,
    pub(super) lobby: Option<&'a LobbyView>,
}

impl Screen<'_> {
    pub(super) fn draw(&self, frame: &mut Frame) {
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
        for internet in self.internet {
            lines.push(Line::raw(internet.as_str()));
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
