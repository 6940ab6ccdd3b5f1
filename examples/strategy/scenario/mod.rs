//! `ServerScenario`: the whole authoritative state of a strategy game as plain
//! data, with edits that keep it valid, and its save file.

use std::path::Path;

use serde::{Deserialize, Serialize};
use switchboard::scenario::{self, ScenarioError};

/// The file magic of strategy scenarios.
pub const MAGIC: [u8; 4] = *b"SWST";
/// The scenario format this build reads and writes.
pub const FORMAT_VERSION: u16 = 1;
/// The largest map side.
pub const MAX_SIDE: u8 = 40;
/// The most nations.
pub const MAX_NATIONS: usize = 8;

/// A nation's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NationId(pub u8);

/// A unit's number, unique in the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UnitId(pub u32);

/// What a province is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Terrain {
    /// Open land: 1 movement point.
    Plains,
    /// 2 movement points; defenders get +1.
    Forest,
    /// 2 movement points; defenders get +1.
    Hills,
    /// 3 movement points; defenders get +2.
    Mountains,
    /// Impassable.
    Water,
}

impl Terrain {
    /// Movement points to enter, or None for impassable.
    pub fn cost(self) -> Option<u8> {
        match self {
            Terrain::Plains => Some(1),
            Terrain::Forest | Terrain::Hills => Some(2),
            Terrain::Mountains => Some(3),
            Terrain::Water => None,
        }
    }

    /// What defending on it adds to a unit's strength.
    pub fn defense(self) -> u8 {
        match self {
            Terrain::Plains | Terrain::Water => 0,
            Terrain::Forest | Terrain::Hills => 1,
            Terrain::Mountains => 2,
        }
    }

    /// One character for maps.
    pub fn glyph(self) -> char {
        match self {
            Terrain::Plains => '.',
            Terrain::Forest => '"',
            Terrain::Hills => 'n',
            Terrain::Mountains => '^',
            Terrain::Water => '~',
        }
    }

    /// From its glyph or name.
    pub fn parse(text: &str) -> Option<Terrain> {
        match text {
            "." | "plains" => Some(Terrain::Plains),
            "\"" | "forest" => Some(Terrain::Forest),
            "n" | "hills" => Some(Terrain::Hills),
            "^" | "mountains" => Some(Terrain::Mountains),
            "~" | "water" => Some(Terrain::Water),
            _ => None,
        }
    }
}

/// What a unit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnitKind {
    /// Slow and strong.
    Infantry,
    /// Fast and weak.
    Cavalry,
}

impl UnitKind {
    /// Movement points per turn.
    pub fn moves(self) -> u8 {
        match self {
            UnitKind::Infantry => 2,
            UnitKind::Cavalry => 4,
        }
    }

    /// Combat strength.
    pub fn strength(self) -> u8 {
        match self {
            UnitKind::Infantry => 3,
            UnitKind::Cavalry => 2,
        }
    }

    /// From its name.
    pub fn parse(text: &str) -> Option<UnitKind> {
        match text {
            "infantry" | "i" => Some(UnitKind::Infantry),
            "cavalry" | "c" => Some(UnitKind::Cavalry),
            _ => None,
        }
    }
}

/// One map square.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Province {
    /// Its terrain.
    pub terrain: Terrain,
    /// Who owns it.
    pub owner: Option<NationId>,
}

/// A player or AI nation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nation {
    /// Its number.
    pub id: NationId,
    /// Its name.
    pub name: String,
    /// Whether the server plays it when no human does.
    pub ai: bool,
}

/// A unit on the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unit {
    /// Its number.
    pub id: UnitId,
    /// Who commands it.
    pub nation: NationId,
    /// What it is.
    pub kind: UnitKind,
    /// Column.
    pub x: u8,
    /// Row.
    pub y: u8,
    /// Movement points left this turn.
    pub moves_left: u8,
}

/// The complete authoritative state of a game.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerScenario {
    /// Its title.
    pub name: String,
    /// Columns.
    pub width: u8,
    /// Rows.
    pub height: u8,
    /// Row by row, `width * height` of them.
    pub provinces: Vec<Province>,
    /// Every nation.
    pub nations: Vec<Nation>,
    /// Every unit.
    pub units: Vec<Unit>,
    /// The turn number, from 1.
    pub turn: u32,
    /// The next unit number to give out.
    pub next_unit: u32,
}

impl ServerScenario {
    /// An all-plains map with no nations.
    pub fn new(name: &str, width: u8, height: u8) -> Result<Self, String> {
        if !(2..=MAX_SIDE).contains(&width) || !(2..=MAX_SIDE).contains(&height) {
            return Err(format!("maps are 2 to {MAX_SIDE} squares on a side"));
        }
        Ok(Self {
            name: name.to_string(),
            width,
            height,
            provinces: vec![
                Province {
                    terrain: Terrain::Plains,
                    owner: None
                };
                width as usize * height as usize
            ],
            nations: Vec::new(),
            units: Vec::new(),
            turn: 1,
            next_unit: 1,
        })
    }

    fn index(&self, x: u8, y: u8) -> Result<usize, String> {
        if x >= self.width || y >= self.height {
            return Err(format!(
                "({x}, {y}) is off the {}x{} map",
                self.width, self.height
            ));
        }
        Ok(y as usize * self.width as usize + x as usize)
    }

    /// The province at (x, y).
    pub fn province(&self, x: u8, y: u8) -> Option<&Province> {
        self.index(x, y).ok().map(|i| &self.provinces[i])
    }

    /// The unit at (x, y), if any.
    pub fn unit_at(&self, x: u8, y: u8) -> Option<&Unit> {
        self.units.iter().find(|u| u.x == x && u.y == y)
    }

    /// A unit by number.
    pub fn unit(&self, id: UnitId) -> Option<&Unit> {
        self.units.iter().find(|u| u.id == id)
    }

    /// Mutable access to a unit.
    pub fn unit_mut(&mut self, id: UnitId) -> Option<&mut Unit> {
        self.units.iter_mut().find(|u| u.id == id)
    }

    /// A nation by number.
    pub fn nation(&self, id: NationId) -> Option<&Nation> {
        self.nations.iter().find(|n| n.id == id)
    }

    /// Paints terrain. Water cannot go under a unit or an owned province.
    pub fn set_terrain(&mut self, x: u8, y: u8, terrain: Terrain) -> Result<(), String> {
        let i = self.index(x, y)?;
        if terrain == Terrain::Water {
            if self.unit_at(x, y).is_some() {
                return Err(format!("a unit stands on ({x}, {y}): no water under units"));
            }
            if self.provinces[i].owner.is_some() {
                return Err(format!("({x}, {y}) is owned: water cannot be owned"));
            }
        }
        self.provinces[i].terrain = terrain;
        Ok(())
    }

    /// Sets or clears a province's owner.
    pub fn set_owner(&mut self, x: u8, y: u8, owner: Option<NationId>) -> Result<(), String> {
        let i = self.index(x, y)?;
        if let Some(nation) = owner {
            if self.nation(nation).is_none() {
                return Err(format!("no nation {}", nation.0));
            }
            if self.provinces[i].terrain == Terrain::Water {
                return Err(format!("({x}, {y}) is water: it cannot be owned"));
            }
        }
        self.provinces[i].owner = owner;
        Ok(())
    }

    /// Adds a nation and returns its number.
    pub fn add_nation(&mut self, name: &str, ai: bool) -> Result<NationId, String> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 20 {
            return Err("nation names have 1 to 20 characters".into());
        }
        if self.nations.len() >= MAX_NATIONS {
            return Err(format!("at most {MAX_NATIONS} nations"));
        }
        if self.nations.iter().any(|n| n.name == name) {
            return Err(format!("there is a nation called {name} already"));
        }
        let id = NationId(
            (0..=u8::MAX)
                .find(|i| self.nation(NationId(*i)).is_none())
                .unwrap_or(0),
        );
        self.nations.push(Nation {
            id,
            name: name.to_string(),
            ai,
        });
        Ok(id)
    }

    /// Places a unit; one unit per province, never on water.
    pub fn place_unit(
        &mut self,
        nation: NationId,
        kind: UnitKind,
        x: u8,
        y: u8,
    ) -> Result<UnitId, String> {
        let i = self.index(x, y)?;
        if self.nation(nation).is_none() {
            return Err(format!("no nation {}", nation.0));
        }
        if self.provinces[i].terrain == Terrain::Water {
            return Err(format!("({x}, {y}) is water: no units on water"));
        }
        if self.unit_at(x, y).is_some() {
            return Err(format!("a unit stands on ({x}, {y}) already"));
        }
        let id = UnitId(self.next_unit);
        self.next_unit += 1;
        self.units.push(Unit {
            id,
            nation,
            kind,
            x,
            y,
            moves_left: kind.moves(),
        });
        Ok(id)
    }

    /// Removes the unit at (x, y).
    pub fn remove_unit_at(&mut self, x: u8, y: u8) -> Result<(), String> {
        let before = self.units.len();
        self.units.retain(|u| (u.x, u.y) != (x, y));
        if self.units.len() == before {
            return Err(format!("no unit at ({x}, {y})"));
        }
        Ok(())
    }

    /// Checks every rule a scenario must keep; the first broken one is the
    /// error.
    pub fn validate(&self) -> Result<(), String> {
        if !(2..=MAX_SIDE).contains(&self.width) || !(2..=MAX_SIDE).contains(&self.height) {
            return Err("map size out of range".into());
        }
        if self.provinces.len() != self.width as usize * self.height as usize {
            return Err("province count does not match the map size".into());
        }
        if self.nations.len() > MAX_NATIONS {
            return Err("too many nations".into());
        }
        for (i, nation) in self.nations.iter().enumerate() {
            if self.nations[..i]
                .iter()
                .any(|n| n.id == nation.id || n.name == nation.name)
            {
                return Err(format!("nation {} appears twice", nation.name));
            }
        }
        for (i, province) in self.provinces.iter().enumerate() {
            if let Some(owner) = province.owner {
                if self.nation(owner).is_none() {
                    return Err(format!(
                        "province {i} belongs to a nation that does not exist"
                    ));
                }
                if province.terrain == Terrain::Water {
                    return Err(format!("province {i} is owned water"));
                }
            }
        }
        for (i, unit) in self.units.iter().enumerate() {
            let province = self
                .province(unit.x, unit.y)
                .ok_or(format!("unit {} is off the map", unit.id.0))?;
            if province.terrain == Terrain::Water {
                return Err(format!("unit {} stands on water", unit.id.0));
            }
            if self.nation(unit.nation).is_none() {
                return Err(format!("unit {} has no nation", unit.id.0));
            }
            if unit.id.0 >= self.next_unit {
                return Err(format!("unit {} has a number not yet given out", unit.id.0));
            }
            if unit.moves_left > unit.kind.moves() {
                return Err(format!("unit {} has more moves than its kind", unit.id.0));
            }
            if self.units[..i]
                .iter()
                .any(|u| u.id == unit.id || (u.x, u.y) == (unit.x, unit.y))
            {
                return Err(format!(
                    "unit {} shares its number or its province",
                    unit.id.0
                ));
            }
        }
        Ok(())
    }

    /// Saves to a scenario file.
    pub fn save(&self, path: &Path) -> Result<(), ScenarioError> {
        self.validate().map_err(ScenarioError::Invalid)?;
        scenario::save(path, MAGIC, FORMAT_VERSION, self)
    }

    /// Loads a scenario file and checks its rules.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let loaded: Self = scenario::load(path, MAGIC, FORMAT_VERSION)?;
        loaded.validate().map_err(ScenarioError::Invalid)?;
        Ok(loaded)
    }

    /// A scenario file's bytes, decoded and checked like [`load`](Self::load)
    /// (what the fuzzer feeds).
    pub fn from_file_bytes(bytes: &[u8]) -> Result<Self, ScenarioError> {
        let loaded: Self = scenario::from_bytes(MAGIC, FORMAT_VERSION, bytes)?;
        loaded.validate().map_err(ScenarioError::Invalid)?;
        Ok(loaded)
    }

    /// The map as text, one row a line: terrain glyphs, units as the first
    /// letter of their kind (upper case for nation 0's, digits of nations
    /// otherwise would not fit: the nation number follows in the legend).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for y in 0..self.height {
            for x in 0..self.width {
                let province = self.province(x, y).expect("on the map");
                let c = match self.unit_at(x, y) {
                    Some(unit) => char::from(b'0' + unit.nation.0),
                    None => match province.owner {
                        Some(owner) if province.terrain == Terrain::Plains => {
                            char::from(b'a' + owner.0)
                        }
                        _ => province.terrain.glyph(),
                    },
                };
                out.push(c);
            }
            out.push('\n');
        }
        out
    }
}

mod builtin;

pub use builtin::builtin;

#[cfg(test)]
mod tests;
