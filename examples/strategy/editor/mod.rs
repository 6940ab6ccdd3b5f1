//! The scenario editor: edits a `ServerScenario` directly — no network, no
//! server process — and saves the file a server loads.

mod screen;

use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};

use crate::scenario::{builtin, NationId, ServerScenario, Terrain, UnitKind};

const HELP: &str = "commands:
  new W H TITLE            a new all-plains map (title may have spaces)
  open valley|islands      start from a shipped scenario
  terrain X Y T            T: plains forest hills mountains water (or . \" n ^ ~)
  rect X1 Y1 X2 Y2 T       paint a rectangle
  owner X Y N|none         set or clear a province's owner
  nation NAME [ai]         add a nation
  unit N KIND X Y          place a unit (KIND: infantry, cavalry)
  remove X Y               remove the unit there
  validate                 check every rule
  show                     print the map
  save [PATH]              save (to the file being edited by default)
  load PATH                load a scenario file
  quit";

/// Runs the editor on `path`: commands from `script` (separated by `;`);
/// without one, the full-screen editor on a terminal, or commands typed on
/// stdin otherwise.
pub fn run(path: &Path, script: Option<&str>, text: bool) -> Result<(), String> {
    let mut editor = Editor::open(path)?;
    match script {
        Some(script) => {
            for command in script.split(';').map(str::trim).filter(|c| !c.is_empty()) {
                println!("> {command}");
                match editor.apply(command) {
                    Ok(Reply::Quit) => return Ok(()),
                    Ok(Reply::Say(text)) => println!("{text}"),
                    Ok(Reply::Quiet) => {}
                    Err(err) => return Err(format!("{command}: {err}")),
                }
            }
            Ok(())
        }
        None if !text && std::io::stdout().is_terminal() => screen::edit(&mut editor),
        None => {
            println!("{HELP}");
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                match editor.apply(line.trim()) {
                    Ok(Reply::Quit) => break,
                    Ok(Reply::Say(text)) => println!("{text}"),
                    Ok(Reply::Quiet) => {}
                    Err(err) => println!("error: {err}"),
                }
            }
            Ok(())
        }
    }
}

/// What a command answers.
pub(crate) enum Reply {
    /// Nothing to say.
    Quiet,
    /// A line (or lines) for the user.
    Say(String),
    /// Leave the editor.
    Quit,
}

/// The scenario being edited, and where it is saved.
pub(crate) struct Editor {
    pub(crate) path: PathBuf,
    pub(crate) scenario: ServerScenario,
}

impl Editor {
    /// Opens `path` if it is a scenario file, or starts a new map.
    fn open(path: &Path) -> Result<Editor, String> {
        let scenario = match ServerScenario::load(path) {
            Ok(s) => s,
            Err(_) if !path.exists() => ServerScenario::new("Untitled", 10, 8)?,
            Err(err) => return Err(format!("{}: {err}", path.display())),
        };
        Ok(Editor {
            path: path.to_path_buf(),
            scenario,
        })
    }
}

fn coord(word: Option<&&str>) -> Result<u8, String> {
    word.and_then(|w| w.parse().ok())
        .ok_or_else(|| "expected a coordinate (0-255)".to_string())
}

fn terrain(word: Option<&&str>) -> Result<Terrain, String> {
    word.and_then(|w| Terrain::parse(w))
        .ok_or_else(|| "expected a terrain".to_string())
}

impl Editor {
    /// Runs one command. Every edit goes through the scenario's checked
    /// methods, so the map stays valid whatever is typed.
    pub(crate) fn apply(&mut self, command: &str) -> Result<Reply, String> {
        let words: Vec<&str> = command.split_whitespace().collect();
        let s = &mut self.scenario;
        match words.as_slice() {
            [] => {}
            ["help"] => return Ok(Reply::Say(HELP.into())),
            ["quit" | "q"] => return Ok(Reply::Quit),
            ["new", w, h, title @ ..] => {
                let (w, h) = (
                    w.parse().map_err(|_| "width")?,
                    h.parse().map_err(|_| "height")?,
                );
                *s = ServerScenario::new(&title.join(" "), w, h)?;
            }
            ["open", name] => *s = builtin(name).ok_or(format!("no shipped scenario {name}"))?,
            ["terrain", rest @ ..] => s.set_terrain(
                coord(rest.first())?,
                coord(rest.get(1))?,
                terrain(rest.get(2))?,
            )?,
            ["rect", rest @ ..] => {
                let (x1, y1, x2, y2) = (
                    coord(rest.first())?,
                    coord(rest.get(1))?,
                    coord(rest.get(2))?,
                    coord(rest.get(3))?,
                );
                let t = terrain(rest.get(4))?;
                for y in y1.min(y2)..=y1.max(y2) {
                    for x in x1.min(x2)..=x1.max(x2) {
                        s.set_terrain(x, y, t)?;
                    }
                }
            }
            ["owner", x, y, "none"] => s.set_owner(coord(Some(x))?, coord(Some(y))?, None)?,
            ["owner", x, y, n] => {
                let n = n.parse().map_err(|_| "expected a nation number or none")?;
                s.set_owner(coord(Some(x))?, coord(Some(y))?, Some(NationId(n)))?
            }
            ["nation", name, "ai"] => {
                return Ok(Reply::Say(format!(
                    "nation {}",
                    s.add_nation(name, true)?.0
                )))
            }
            ["nation", name] => {
                return Ok(Reply::Say(format!(
                    "nation {}",
                    s.add_nation(name, false)?.0
                )))
            }
            ["unit", n, kind, x, y] => {
                let n = NationId(n.parse().map_err(|_| "expected a nation number")?);
                let kind = UnitKind::parse(kind).ok_or("expected infantry or cavalry")?;
                let id = s.place_unit(n, kind, coord(Some(x))?, coord(Some(y))?)?;
                return Ok(Reply::Say(format!("unit {}", id.0)));
            }
            ["remove", x, y] => s.remove_unit_at(coord(Some(x))?, coord(Some(y))?)?,
            ["validate"] => {
                s.validate()?;
                return Ok(Reply::Say("valid".into()));
            }
            ["show"] => return Ok(Reply::Say(s.render().trim_end().to_string())),
            ["save"] => {
                s.save(&self.path).map_err(|e| e.to_string())?;
                return Ok(Reply::Say(format!("saved {}", self.path.display())));
            }
            ["save", path] => {
                s.save(Path::new(path)).map_err(|e| e.to_string())?;
                return Ok(Reply::Say(format!("saved {path}")));
            }
            ["load", path] => {
                *s = ServerScenario::load(Path::new(path)).map_err(|e| e.to_string())?
            }
            _ => return Err(format!("unknown command; {HELP}")),
        }
        Ok(Reply::Quiet)
    }
}
