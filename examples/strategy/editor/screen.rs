//! The editor's full-screen interface: t, o and u cycle the terrain, the
//! owner and the unit under the cursor; `:` takes any editor command.

use std::collections::VecDeque;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;

use super::{Editor, Reply};
use crate::scenario::{Terrain, UnitKind};
use crate::tui::nation_color;

const LOG_LINES: usize = 200;

const TERRAINS: [Terrain; 5] = [
    Terrain::Plains,
    Terrain::Forest,
    Terrain::Hills,
    Terrain::Mountains,
    Terrain::Water,
];

/// The full-screen scenario editor: the map with a cursor, keys for the
/// common edits, and `:` for any editor command (`help` lists them). Every
/// edit goes through the same checked commands as a script.
pub(crate) fn edit(editor: &mut Editor) -> Result<(), String> {
    let mut terminal = ratatui::init();
    let mut cursor = (0u8, 0u8);
    let mut log: VecDeque<String> = VecDeque::from([format!(
        "editing {}; : for commands, q quits",
        editor.path.display()
    )]);
    let mut command: Option<String> = None;
    let result = loop {
        let s = &editor.scenario;
        cursor = (cursor.0.min(s.width - 1), cursor.1.min(s.height - 1));
        let prompt = command.clone();
        if let Err(err) =
            terminal.draw(|frame| draw_editor(frame, editor, cursor, &log, prompt.as_deref()))
        {
            break Err(format!("cannot draw: {err}"));
        }
        let key = match event::read() {
            Ok(Event::Key(key)) if key.kind == KeyEventKind::Press => key.code,
            Ok(_) => continue,
            Err(err) => break Err(format!("terminal input: {err}")),
        };
        // Typing a command line.
        if let Some(line) = command.as_mut() {
            match key {
                KeyCode::Char(c) => line.push(c),
                KeyCode::Backspace => {
                    line.pop();
                }
                KeyCode::Esc => command = None,
                KeyCode::Enter => {
                    let line = command.take().unwrap_or_default();
                    match editor.apply(&line) {
                        Ok(Reply::Quit) => break Ok(()),
                        Ok(Reply::Say(text)) => log.extend(text.lines().map(String::from)),
                        Ok(Reply::Quiet) => log.push_back(format!("> {line}")),
                        Err(err) => log.push_back(format!("{line}: {err}")),
                    }
                }
                _ => {}
            }
            continue;
        }
        let (x, y) = cursor;
        let s = &editor.scenario;
        let here = s.province(x, y).copied();
        let edit = match key {
            KeyCode::Char('q') | KeyCode::Esc => break Ok(()),
            KeyCode::Char(':') => {
                command = Some(String::new());
                None
            }
            KeyCode::Left | KeyCode::Char('h') => {
                cursor.0 = x.saturating_sub(1);
                None
            }
            KeyCode::Right | KeyCode::Char('l') => {
                cursor.0 = (x + 1).min(s.width - 1);
                None
            }
            KeyCode::Up | KeyCode::Char('k') => {
                cursor.1 = y.saturating_sub(1);
                None
            }
            KeyCode::Down | KeyCode::Char('j') => {
                cursor.1 = (y + 1).min(s.height - 1);
                None
            }
            KeyCode::Char('t') => here.map(|p| {
                let next = TERRAINS[(TERRAINS.iter().position(|t| *t == p.terrain).unwrap_or(0)
                    + 1)
                    % TERRAINS.len()];
                vec![format!("terrain {x} {y} {}", next.glyph())]
            }),
            KeyCode::Char('o') => here.map(|p| {
                let ids: Vec<u8> = s.nations.iter().map(|n| n.id.0).collect();
                let next = match p.owner {
                    None => ids.first().copied(),
                    Some(owner) => ids
                        .iter()
                        .position(|i| *i == owner.0)
                        .and_then(|i| ids.get(i + 1))
                        .copied(),
                };
                vec![format!(
                    "owner {x} {y} {}",
                    next.map_or("none".into(), |n| n.to_string())
                )]
            }),
            KeyCode::Char('u') => {
                // none → infantry of the first nation → cavalry → the next nation … → none
                let slots: Vec<(u8, &str)> = s
                    .nations
                    .iter()
                    .flat_map(|n| [(n.id.0, "infantry"), (n.id.0, "cavalry")])
                    .collect();
                let current = s.unit_at(x, y).map(|u| {
                    (
                        u.nation.0,
                        if u.kind == UnitKind::Infantry {
                            "infantry"
                        } else {
                            "cavalry"
                        },
                    )
                });
                let next = match current {
                    None => slots.first().copied(),
                    Some(c) => slots
                        .iter()
                        .position(|slot| *slot == c)
                        .and_then(|i| slots.get(i + 1))
                        .copied(),
                };
                let mut edits = Vec::new();
                if current.is_some() {
                    edits.push(format!("remove {x} {y}"));
                }
                if let Some((nation, kind)) = next {
                    edits.push(format!("unit {nation} {kind} {x} {y}"));
                }
                Some(edits)
            }
            KeyCode::Char('v') => Some(vec!["validate".into()]),
            KeyCode::Char('s') => Some(vec!["save".into()]),
            _ => None,
        };
        for line in edit.unwrap_or_default() {
            match editor.apply(&line) {
                Ok(Reply::Say(text)) => log.extend(text.lines().map(String::from)),
                Ok(_) => {}
                Err(err) => log.push_back(format!("{line}: {err}")),
            }
        }
        while log.len() > LOG_LINES {
            log.pop_front();
        }
    };
    ratatui::restore();
    result
}

fn draw_editor(
    frame: &mut Frame,
    editor: &Editor,
    cursor: (u8, u8),
    log: &VecDeque<String>,
    prompt: Option<&str>,
) {
    let s = &editor.scenario;
    let [top, bottom] =
        Layout::vertical([Constraint::Min(10), Constraint::Length(9)]).areas(frame.area());
    let [map_area, side] =
        Layout::horizontal([Constraint::Min(20), Constraint::Length(38)]).areas(top);
    let mut lines = Vec::new();
    for y in 0..s.height {
        let mut spans = Vec::new();
        for x in 0..s.width {
            let p = s.province(x, y).expect("on the map");
            let owner = p.owner.map_or(' ', |n| char::from(b'a' + n.0));
            let (text, fg) = match s.unit_at(x, y) {
                Some(u) => (
                    format!(
                        "{}{}",
                        if u.kind == UnitKind::Infantry {
                            'I'
                        } else {
                            'C'
                        },
                        u.nation.0
                    ),
                    nation_color(u.nation),
                ),
                None => (
                    format!("{}{owner}", p.terrain.glyph()),
                    p.owner.map_or(Color::White, nation_color),
                ),
            };
            let mut style = Style::default().fg(fg);
            if (x, y) == cursor {
                style = style.add_modifier(Modifier::REVERSED);
            }
            spans.push(Span::styled(text, style));
        }
        lines.push(Line::from(spans));
    }
    let title = format!(" {} — {}x{} ", s.name, s.width, s.height);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        map_area,
    );

    let mut info = vec![
        Line::raw(format!("file: {}", editor.path.display())),
        Line::raw(""),
    ];
    for n in &s.nations {
        let ai = if n.ai { " (AI)" } else { "" };
        info.push(Line::styled(
            format!("{} {}{ai}", n.id.0, n.name),
            Style::default().fg(nation_color(n.id)),
        ));
    }
    let (x, y) = cursor;
    if let Some(p) = s.province(x, y) {
        info.push(Line::raw(""));
        info.push(Line::raw(format!(
            "({x}, {y}) {:?}, owner {}",
            p.terrain,
            p.owner.map_or("none".into(), |o| o.0.to_string())
        )));
    }
    let validity = match s.validate() {
        Ok(()) => "valid".to_string(),
        Err(err) => format!("INVALID: {err}"),
    };
    info.push(Line::raw(""));
    info.push(Line::raw(validity));
    info.push(Line::raw(""));
    info.push(Line::raw("t terrain · o owner · u unit"));
    info.push(Line::raw("v validate · s save · : command"));
    frame.render_widget(
        Paragraph::new(info)
            .wrap(Wrap { trim: true })
            .block(Block::bordered().title(" scenario ")),
        side,
    );

    let mut log_lines: Vec<Line> = log
        .iter()
        .rev()
        .take(bottom.height.saturating_sub(3) as usize)
        .rev()
        .map(|l| Line::raw(l.as_str()))
        .collect();
    if let Some(prompt) = prompt {
        log_lines.push(Line::styled(
            format!(":{prompt}_"),
            Style::default().add_modifier(Modifier::BOLD),
        ));
    }
    frame.render_widget(
        Paragraph::new(log_lines).block(
            Block::bordered()
                .title(" editor ")
                .title_bottom("arrows move · : command (help) · q quit"),
        ),
        bottom,
    );
}
