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
    /// Requests and updates.
    pub enum Act {
        /// Request: move a unit one province ([`Move`]).
        Move = 1,
        /// Request: take the province a unit stands on (content: `UnitId`).
        Claim = 2,
        /// Request: attack a neighbouring enemy unit ([`Attack`]).
        Attack = 3,
        /// Request: I am done with this turn (content: `()`).
        EndTurn = 4,
        /// Request: save the running game on the server (content: name).
        Save = 5,
        /// Request: load a saved game on the server (content: name; host only).
        Load = 6,
        /// Lobby request: I want this nation (content: `NationId`).
        Pick = 7,
        /// Lobby request: ready or not (content: `bool`).
        Ready = 8,
        /// Lobby request: start the game (host only; content: `()`).
        Start = 9,
        /// Update: what your nation sees ([`NationView`]).
        View = 20,
        /// Update: the lobby ([`LobbyView`]).
        LobbyState = 21,
        /// Update: something happened ([`String`]).
        Event = 22,
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
        self.tiles[y as usize * self.width as usize + x as usize]
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
}
