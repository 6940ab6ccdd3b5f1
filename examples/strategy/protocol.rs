//! What the strategy client and server say to each other.

use serde::{Deserialize, Serialize};

use crate::scenario::{NationId, Terrain, Unit, UnitId};

switchboard::channels! {
    /// The game's channels.
    pub enum Chan {
        /// Orders in, views out.
        Game = 16,
        /// The lobby of a hosted game.
        Lobby = 17,
    }
}

switchboard::actions! {
    /// Orders in, views out, on the game channel.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum GameAct in Chan::Game {
        /// Request: move a unit one province.
        Move(Move) = 1,
        /// Request: take the province a unit stands on.
        Claim(UnitId) = 2,
        /// Request: attack a neighbouring enemy unit.
        Attack(Attack) = 3,
        /// Request: I am done with this turn.
        EndTurn = 4,
        /// Request: save the running game on the server, by name.
        Save(String) = 5,
        /// Request: load a saved game on the server, by name (host only).
        Load(String) = 6,
        /// Update: what your nation sees.
        View(NationView) = 20,
        /// Update: something happened.
        Event(String) = 22,
    }
}

switchboard::actions! {
    /// The lobby of a hosted game.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum LobbyAct in Chan::Lobby {
        /// Request: I want this nation.
        Pick(NationId) = 7,
        /// Request: ready or not.
        Ready(bool) = 8,
        /// Request: start the game (host only).
        Start = 9,
        /// Update: the lobby.
        State(LobbyView) = 21,
    }
}

switchboard::messages! {
    /// Everything the game says, on either channel: what the server
    /// receives, and what a client decodes its updates as.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Msg {
        /// On the game channel.
        Game(GameAct),
        /// On the lobby channel.
        Lobby(LobbyAct),
    }
}

/// Move a unit to a neighbouring province.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    /// Which unit.
    pub unit: UnitId,
    /// Column.
    pub x: u8,
    /// Row.
    pub y: u8,
}

/// Attack with `unit` the enemy unit `target` next to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attack {
    /// The attacker.
    pub unit: UnitId,
    /// The defender.
    pub target: UnitId,
}

/// One province as a nation sees it: fog hides the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TileView {
    /// Its terrain.
    pub terrain: Terrain,
    /// Its owner.
    pub owner: Option<NationId>,
}

/// A nation's status in the turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NationStatus {
    /// Which.
    pub id: NationId,
    /// Its name.
    pub name: String,
    /// Played by the server.
    pub ai: bool,
    /// Has ended its turn.
    pub ended: bool,
    /// Provinces it owns.
    pub provinces: u16,
}

/// Everything one nation may see, and nothing more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NationView {
    /// The scenario's title.
    pub scenario: String,
    /// The turn.
    pub turn: u32,
    /// Whose view this is (None: a spectator waiting for a seat).
    pub you: Option<NationId>,
    /// Columns.
    pub width: u8,
    /// Rows.
    pub height: u8,
    /// Row by row; None where the fog is.
    pub tiles: Vec<Option<TileView>>,
    /// Units in sight: all of yours, others' only where you see.
    pub units: Vec<Unit>,
    /// Every nation's turn status (public knowledge).
    pub nations: Vec<NationStatus>,
    /// Set when one nation owns every land province.
    pub winner: Option<NationId>,
}

impl NationView {
    /// The tile at (x, y), if seen.
    pub fn tile(&self, x: u8, y: u8) -> Option<TileView> {
        if x >= self.width || y >= self.height {
            return None;
        }
        // A view whose tiles do not fill its map (a broken or hostile
        // server) shows fog where they are missing.
        let at = y as usize * self.width as usize + x as usize;
        self.tiles.get(at).copied().flatten()
    }

    /// Makes the server's text safe to print (see [`printable`]).
    pub fn make_printable(&mut self) {
        self.scenario = printable(&self.scenario);
        for nation in &mut self.nations {
            nation.name = printable(&nation.name);
        }
    }

    /// The unit at (x, y), if seen.
    pub fn unit_at(&self, x: u8, y: u8) -> Option<&Unit> {
        self.units.iter().find(|u| u.x == x && u.y == y)
    }
}

/// A seat in the lobby.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seat {
    /// The nation.
    pub nation: NationId,
    /// Its name.
    pub name: String,
    /// The player's name, if a player took it.
    pub player: Option<String>,
    /// Whether that player is ready.
    pub ready: bool,
}

/// The lobby of a hosted game.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LobbyView {
    /// Every seat.
    pub seats: Vec<Seat>,
    /// Whether the game has started.
    pub started: bool,
    /// The host's name.
    pub host: Option<String>,
    /// Everyone who joined, seated or not.
    pub players: Vec<LobbyPlayer>,
}

/// Someone who joined the game.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LobbyPlayer {
    /// The player's name.
    pub name: String,
    /// The nation picked, if any.
    pub nation: Option<NationId>,
    /// Whether the player is connected now (false: away, its seat kept).
    pub online: bool,
}

impl LobbyView {
    /// Makes the server's text safe to print (see [`printable`]).
    pub fn make_printable(&mut self) {
        for seat in &mut self.seats {
            seat.name = printable(&seat.name);
            seat.player = seat.player.as_deref().map(printable);
        }
        self.host = self.host.as_deref().map(printable);
        for player in &mut self.players {
            player.name = printable(&player.name);
        }
    }
}

/// Text from the server as the terminal may show it: at most 200
/// characters, control characters (a terminal's escape sequences among
/// them) shown as `?`.
pub fn printable(text: &str) -> String {
    text.chars()
        .take(200)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// A nation's digit on the map (`?` past 9).
pub fn nation_digit(nation: NationId) -> char {
    char::from_digit(u32::from(nation.0), 10).unwrap_or('?')
}

/// A nation's letter on the map (`?` past z).
pub fn nation_letter(nation: NationId) -> char {
    if nation.0 < 26 {
        char::from(b'a' + nation.0)
    } else {
        '?'
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{render, render_lobby};
    use crate::scenario::UnitKind;

    #[test]
    fn hostile_server_views_render_without_a_panic_or_terminal_escapes() {
        // Tiles that do not fill the map, nations past the map's digits and
        // letters, and escape sequences in every name.
        let evil = "\u{1b}[2J\u{1b}]0;owned\u{7}";
        let mut view = NationView {
            scenario: evil.repeat(100),
            turn: u32::MAX,
            you: Some(NationId(250)),
            width: 200,
            height: 3,
            tiles: vec![Some(TileView {
                terrain: Terrain::Plains,
                owner: Some(NationId(250)),
            })],
            units: vec![Unit {
                id: UnitId(1),
                nation: NationId(255),
                kind: UnitKind::Infantry,
                x: 150,
                y: 2,
                moves_left: 9,
            }],
            nations: vec![NationStatus {
                id: NationId(250),
                name: evil.into(),
                ai: false,
                ended: false,
                provinces: 1,
            }],
            winner: Some(NationId(250)),
        };
        view.make_printable();
        let text = render(&view);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains('?'));
        assert_eq!(view.tile(5, 2), None, "missing tiles are fog");
        let mut lobby = LobbyView {
            seats: vec![Seat {
                nation: NationId(250),
                name: evil.into(),
                player: Some(evil.into()),
                ready: true,
            }],
            started: false,
            host: Some(evil.into()),
            players: vec![LobbyPlayer {
                name: evil.into(),
                nation: None,
                online: true,
            }],
        };
        lobby.make_printable();
        let text = render_lobby(&lobby);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
    }
}
