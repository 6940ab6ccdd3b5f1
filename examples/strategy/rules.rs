//! The rules, as the server runs them: orders validated against the
//! scenario, applied only when valid, and each nation told only what it
//! sees.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use switchboard::{Audience, ClientId, GameLogic, Outbox, Rejection, Request};

use crate::ai;
use crate::protocol::{
    Act, Attack, Chan, LobbyView, Move, NationStatus, NationView, Seat, TileView,
};
use crate::scenario::{NationId, ServerScenario, Terrain, UnitId};

/// How far units see (squares, in every direction).
pub const UNIT_SIGHT: i16 = 2;
/// How far owned provinces see.
pub const PROVINCE_SIGHT: i16 = 1;

/// Checks a one-square move; returns its cost in movement points.
pub fn check_move(
    s: &ServerScenario,
    nation: NationId,
    unit: UnitId,
    x: u8,
    y: u8,
) -> Result<u8, String> {
    let u = s.unit(unit).ok_or("no such unit")?;
    if u.nation != nation {
        return Err("that unit is not yours".into());
    }
    let province = s.province(x, y).ok_or("that is off the map")?;
    if u.x.abs_diff(x) + u.y.abs_diff(y) != 1 {
        return Err("units move one province at a time, not diagonally".into());
    }
    let cost = province.terrain.cost().ok_or("units cannot enter water")?;
    if u.moves_left < cost {
        return Err(format!(
            "not enough movement left ({} of {cost})",
            u.moves_left
        ));
    }
    match s.unit_at(x, y) {
        Some(other) if other.nation == nation => Err("one of your units is there".into()),
        Some(_) => Err("an enemy unit is there: attack it".into()),
        None => Ok(cost),
    }
}

/// Applies a checked move.
pub fn do_move(s: &mut ServerScenario, unit: UnitId, x: u8, y: u8, cost: u8) {
    if let Some(u) = s.unit_mut(unit) {
        u.x = x;
        u.y = y;
        u.moves_left -= cost;
    }
}

/// Checks a claim of the province under `unit`.
pub fn check_claim(s: &ServerScenario, nation: NationId, unit: UnitId) -> Result<(), String> {
    let u = s.unit(unit).ok_or("no such unit")?;
    if u.nation != nation {
        return Err("that unit is not yours".into());
    }
    if u.moves_left == 0 {
        return Err("that unit has no movement left this turn".into());
    }
    if s.province(u.x, u.y).and_then(|p| p.owner) == Some(nation) {
        return Err("that province is yours already".into());
    }
    Ok(())
}

/// Applies a checked claim.
pub fn do_claim(s: &mut ServerScenario, unit: UnitId) {
    let Some(u) = s.unit(unit).copied() else {
        return;
    };
    let _ = s.set_owner(u.x, u.y, Some(u.nation));
    if let Some(u) = s.unit_mut(unit) {
        u.moves_left = 0;
    }
}

/// Checks an attack; returns whether the attacker wins (strength above the
/// defender's strength plus its terrain's defense; ties hold).
pub fn check_attack(
    s: &ServerScenario,
    nation: NationId,
    unit: UnitId,
    target: UnitId,
) -> Result<bool, String> {
    let u = s.unit(unit).ok_or("no such unit")?;
    if u.nation != nation {
        return Err("that unit is not yours".into());
    }
    let t = s.unit(target).ok_or("no such target")?;
    if t.nation == nation {
        return Err("you cannot attack your own unit".into());
    }
    if u.x.abs_diff(t.x) + u.y.abs_diff(t.y) != 1 {
        return Err("the target is not next to that unit".into());
    }
    if u.moves_left == 0 {
        return Err("that unit has no movement left this turn".into());
    }
    let terrain = s.province(t.x, t.y).map_or(Terrain::Plains, |p| p.terrain);
    Ok(u.kind.strength() > t.kind.strength() + terrain.defense())
}

/// Applies a checked attack: the loser is removed, the attacker is spent.
pub fn do_attack(s: &mut ServerScenario, unit: UnitId, target: UnitId, attacker_wins: bool) {
    let loser = if attacker_wins { target } else { unit };
    s.units.retain(|u| u.id != loser);
    if let Some(u) = s.unit_mut(unit) {
        u.moves_left = 0;
    }
}

/// Which provinces `nation` sees.
pub fn sight(s: &ServerScenario, nation: NationId) -> Vec<bool> {
    let (w, h) = (s.width as i16, s.height as i16);
    let mut seen = vec![false; s.provinces.len()];
    let mut light = |cx: i16, cy: i16, r: i16| {
        for y in (cy - r).max(0)..=(cy + r).min(h - 1) {
            for x in (cx - r).max(0)..=(cx + r).min(w - 1) {
                seen[(y * w + x) as usize] = true;
            }
        }
    };
    for u in s.units.iter().filter(|u| u.nation == nation) {
        light(u.x as i16, u.y as i16, UNIT_SIGHT);
    }
    for (i, p) in s.provinces.iter().enumerate() {
        if p.owner == Some(nation) {
            light(i as i16 % w, i as i16 / w, PROVINCE_SIGHT);
        }
    }
    seen
}

/// The one nation with units left, if only one has any.
pub fn winner(s: &ServerScenario) -> Option<NationId> {
    let alive: BTreeSet<NationId> = s.units.iter().map(|u| u.nation).collect();
    (alive.len() == 1).then(|| *alive.iter().next().expect("one"))
}

/// A validated order.
#[derive(Debug)]
pub enum Command {
    /// Move (unit, x, y, cost).
    Move(UnitId, u8, u8, u8),
    /// Claim under the unit.
    Claim(UnitId),
    /// Attack (unit, target, attacker wins).
    Attack(UnitId, UnitId, bool),
    /// End the nation's turn.
    EndTurn(NationId),
    /// Save under this (validated) name.
    Save(String),
    /// Replace the game with a loaded one.
    Load(Box<ServerScenario>),
    /// Take a seat in the lobby.
    Pick(NationId),
    /// Mark ready.
    Ready(bool),
    /// Start the game.
    Start,
}

#[derive(Debug, Clone)]
struct Player {
    name: String,
    nation: Option<NationId>,
    ready: bool,
    online: bool,
}

/// The strategy game's server logic.
pub struct StrategyLogic {
    scenario: ServerScenario,
    players: HashMap<ClientId, Player>,
    host: Option<ClientId>,
    ended: BTreeSet<NationId>,
    started: bool,
    save_dir: PathBuf,
}

fn reject<T>(reason: impl Into<String>) -> Result<T, Rejection> {
    Err(Rejection::invalid(reason))
}

/// Save names: 1 to 32 of `a-z`, `0-9`, `-`, `_` — never a path.
pub fn check_save_name(name: &str) -> Result<(), String> {
    let ok = (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err("save names are 1 to 32 characters of a-z, 0-9, - and _".into())
    }
}

impl StrategyLogic {
    /// A game of `scenario`; with `lobby`, players pick nations and the host
    /// starts it, without, each joining player gets the next free human
    /// nation and plays at once. Saves go to `save_dir`.
    pub fn new(scenario: ServerScenario, lobby: bool, save_dir: PathBuf) -> Self {
        Self {
            scenario,
            players: HashMap::new(),
            host: None,
            ended: BTreeSet::new(),
            started: !lobby,
            save_dir,
        }
    }

    fn nation_of(&self, client: ClientId) -> Result<NationId, Rejection> {
        if !self.started {
            return reject("the game has not started");
        }
        self.players
            .get(&client)
            .and_then(|p| p.nation)
            .ok_or_else(|| Rejection::invalid("you have no nation in this game"))
    }

    fn taken(&self, nation: NationId) -> bool {
        self.players.values().any(|p| p.nation == Some(nation))
    }

    /// What `nation` sees (None: a spectator, who sees nothing).
    pub fn view(&self, nation: Option<NationId>) -> NationView {
        let s = &self.scenario;
        let seen = nation.map_or_else(|| vec![false; s.provinces.len()], |n| sight(s, n));
        let tiles = s
            .provinces
            .iter()
            .zip(&seen)
            .map(|(p, seen)| {
                seen.then_some(TileView {
                    terrain: p.terrain,
                    owner: p.owner,
                })
            })
            .collect();
        let w = s.width as usize;
        let units = s
            .units
            .iter()
            .filter(|u| Some(u.nation) == nation || seen[u.y as usize * w + u.x as usize])
            .copied()
            .collect();
        let nations = s
            .nations
            .iter()
            .map(|n| NationStatus {
                id: n.id,
                name: n.name.clone(),
                ai: n.ai && !self.taken(n.id),
                ended: self.ended.contains(&n.id),
                provinces: s.provinces.iter().filter(|p| p.owner == Some(n.id)).count() as u16,
            })
            .collect();
        NationView {
            scenario: s.name.clone(),
            turn: s.turn,
            you: nation,
            width: s.width,
            height: s.height,
            tiles,
            units,
            nations,
            winner: winner(s),
        }
    }

    fn lobby(&self) -> LobbyView {
        LobbyView {
            seats: self
                .scenario
                .nations
                .iter()
                .map(|n| {
                    let player = self.players.values().find(|p| p.nation == Some(n.id));
                    Seat {
                        nation: n.id,
                        name: n.name.clone(),
                        player: player.map(|p| p.name.clone()),
                        ready: player.is_some_and(|p| p.ready),
                    }
                })
                .collect(),
            started: self.started,
            host: self
                .host
                .and_then(|h| self.players.get(&h))
                .map(|p| p.name.clone()),
        }
    }

    /// Sends every player its own view (and the lobby before the start).
    fn send_views(&self, out: &mut Outbox) {
        for (client, player) in &self.players {
            if !player.online {
                continue;
            }
            let view = self.view(player.nation.filter(|_| self.started));
            let _ = out.send(Audience::One(*client), Chan::Game, Act::View, &view);
        }
        let _ = out.send(Audience::All, Chan::Lobby, Act::LobbyState, &self.lobby());
    }

    fn tell(&self, nations: &[NationId], text: String, out: &mut Outbox) {
        let clients: Vec<ClientId> = self
            .players
            .iter()
            .filter(|(_, p)| p.nation.is_some_and(|n| nations.contains(&n)))
            .map(|(c, _)| *c)
            .collect();
        if !clients.is_empty() {
            let _ = out.send(Audience::Only(clients), Chan::Game, Act::Event, &text);
        }
    }

    /// Ends the turn once every nation with a connected player has ended it:
    /// nations whose player is away are skipped, never waited for. Then the
    /// AI plays its nations and a new turn begins.
    fn maybe_end_turn(&mut self, out: &mut Outbox) {
        if !self.started || winner(&self.scenario).is_some() {
            return;
        }
        let playing: BTreeSet<NationId> = self
            .players
            .values()
            .filter(|p| p.online)
            .filter_map(|p| p.nation)
            .collect();
        if playing.is_empty() || !playing.is_subset(&self.ended) {
            return;
        }
        let ai_nations: Vec<NationId> = self
            .scenario
            .nations
            .iter()
            .filter(|n| n.ai && !self.taken(n.id))
            .map(|n| n.id)
            .collect();
        for nation in ai_nations {
            for event in ai::play(&mut self.scenario, nation) {
                self.tell(&[nation], event, out);
            }
        }
        for unit in &mut self.scenario.units {
            unit.moves_left = unit.kind.moves();
        }
        self.scenario.turn += 1;
        self.ended.clear();
        let turn = self.scenario.turn;
        let _ = out.send(
            Audience::All,
            Chan::Game,
            Act::Event,
            &format!("turn {turn} begins"),
        );
    }
}

impl GameLogic for StrategyLogic {
    type Command = Command;

    fn validate(&self, request: &Request) -> Result<Command, Rejection> {
        let channel = request.channel::<Chan>()?;
        let action = request.action::<Act>()?;
        let client = request.client;
        let s = &self.scenario;
        match (channel, action) {
            (Chan::Game, Act::Move) => {
                let m: Move = request.content()?;
                let nation = self.nation_of(client)?;
                let cost = check_move(s, nation, m.unit, m.x, m.y).map_err(Rejection::invalid)?;
                Ok(Command::Move(m.unit, m.x, m.y, cost))
            }
            (Chan::Game, Act::Claim) => {
                let unit: UnitId = request.content()?;
                check_claim(s, self.nation_of(client)?, unit).map_err(Rejection::invalid)?;
                Ok(Command::Claim(unit))
            }
            (Chan::Game, Act::Attack) => {
                let a: Attack = request.content()?;
                let wins = check_attack(s, self.nation_of(client)?, a.unit, a.target)
                    .map_err(Rejection::invalid)?;
                Ok(Command::Attack(a.unit, a.target, wins))
            }
            (Chan::Game, Act::EndTurn) => {
                request.content::<()>()?;
                let nation = self.nation_of(client)?;
                if self.ended.contains(&nation) {
                    return reject("you have ended this turn already");
                }
                if winner(s).is_some() {
                    return reject("the game is over");
                }
                Ok(Command::EndTurn(nation))
            }
            (Chan::Game, Act::Save) => {
                let name: String = request.content()?;
                self.nation_of(client)?;
                check_save_name(&name).map_err(Rejection::invalid)?;
                Ok(Command::Save(name))
            }
            (Chan::Game, Act::Load) => {
                let name: String = request.content()?;
                if self.host != Some(client) {
                    return reject("only the host loads games");
                }
                check_save_name(&name).map_err(Rejection::invalid)?;
                let path = self.save_dir.join(format!("{name}.swst"));
                let loaded = ServerScenario::load(&path)
                    .map_err(|e| Rejection::invalid(format!("cannot load {name}: {e}")))?;
                Ok(Command::Load(Box::new(loaded)))
            }
            (Chan::Lobby, Act::Pick) => {
                let nation: NationId = request.content()?;
                if self.started {
                    return reject("the game has started");
                }
                if s.nation(nation).is_none() {
                    return reject("no such nation");
                }
                if self.taken(nation) {
                    return reject("that nation is taken");
                }
                Ok(Command::Pick(nation))
            }
            (Chan::Lobby, Act::Ready) => {
                let ready: bool = request.content()?;
                if self.started {
                    return reject("the game has started");
                }
                if self.players.get(&client).and_then(|p| p.nation).is_none() {
                    return reject("pick a nation first");
                }
                Ok(Command::Ready(ready))
            }
            (Chan::Lobby, Act::Start) => {
                request.content::<()>()?;
                if self.started {
                    return reject("the game has started");
                }
                if self.host != Some(client) {
                    return reject("only the host starts the game");
                }
                let seated: Vec<&Player> = self
                    .players
                    .values()
                    .filter(|p| p.nation.is_some())
                    .collect();
                if seated.is_empty() {
                    return reject("nobody has picked a nation");
                }
                if let Some(p) = seated.iter().find(|p| !p.ready) {
                    return reject(format!("{} is not ready", p.name));
                }
                Ok(Command::Start)
            }
            _ => Err(Rejection {
                kind: switchboard::manager::RejectionKind::UnknownAction,
                reason: format!("{action:?} is not a request on {channel:?}"),
            }),
        }
    }

    fn apply(&mut self, client: ClientId, command: Command, out: &mut Outbox) {
        let nation = self.players.get(&client).and_then(|p| p.nation);
        match command {
            Command::Move(unit, x, y, cost) => do_move(&mut self.scenario, unit, x, y, cost),
            Command::Claim(unit) => {
                do_claim(&mut self.scenario, unit);
                if let Some(n) = nation {
                    self.tell(&[n], format!("province claimed by unit {}", unit.0), out);
                }
            }
            Command::Attack(unit, target, wins) => {
                let defender = self.scenario.unit(target).map(|u| u.nation);
                do_attack(&mut self.scenario, unit, target, wins);
                let text = if wins {
                    format!("unit {} destroyed unit {}", unit.0, target.0)
                } else {
                    format!("unit {} fell attacking unit {}", unit.0, target.0)
                };
                let involved: Vec<NationId> = nation.into_iter().chain(defender).collect();
                self.tell(&involved, text, out);
            }
            Command::EndTurn(n) => {
                self.ended.insert(n);
                self.maybe_end_turn(out);
            }
            Command::Save(name) => {
                let path = self.save_dir.join(format!("{name}.swst"));
                let result = std::fs::create_dir_all(&self.save_dir)
                    .map_err(switchboard::scenario::ScenarioError::from)
                    .and_then(|()| self.scenario.save(&path));
                let text = match result {
                    Ok(()) => format!("game saved as {name}"),
                    Err(err) => format!("saving {name} failed: {err}"),
                };
                let _ = out.send(Audience::One(client), Chan::Game, Act::Event, &text);
            }
            Command::Load(scenario) => {
                self.scenario = *scenario;
                self.ended.clear();
                for player in self.players.values_mut() {
                    if player
                        .nation
                        .is_some_and(|n| self.scenario.nation(n).is_none())
                    {
                        player.nation = None;
                    }
                }
                let _ = out.send(
                    Audience::All,
                    Chan::Game,
                    Act::Event,
                    &format!("loaded {}", self.scenario.name),
                );
            }
            Command::Pick(n) => {
                if let Some(p) = self.players.get_mut(&client) {
                    p.nation = Some(n);
                    p.ready = false;
                }
            }
            Command::Ready(ready) => {
                if let Some(p) = self.players.get_mut(&client) {
                    p.ready = ready;
                }
            }
            Command::Start => {
                self.started = true;
                let _ = out.send(
                    Audience::All,
                    Chan::Game,
                    Act::Event,
                    &"the game begins".to_string(),
                );
            }
        }
        self.send_views(out);
    }

    fn on_join(&mut self, client: ClientId, name: &str, out: &mut Outbox) {
        let nation = if self.started {
            self.scenario
                .nations
                .iter()
                .find(|n| !n.ai && !self.taken(n.id))
                .map(|n| n.id)
        } else {
            None
        };
        self.players.insert(
            client,
            Player {
                name: name.to_string(),
                nation,
                ready: false,
                online: true,
            },
        );
        self.host.get_or_insert(client);
        self.send_views(out);
    }

    fn on_reconnect(&mut self, client: ClientId, out: &mut Outbox) {
        if let Some(p) = self.players.get_mut(&client) {
            p.online = true;
        }
        self.send_views(out);
    }

    fn on_connection_lost(&mut self, client: ClientId, out: &mut Outbox) {
        if let Some(p) = self.players.get_mut(&client) {
            p.online = false;
        }
        // Whoever is left may now be the last ones to end the turn.
        self.maybe_end_turn(out);
        self.send_views(out);
    }

    fn on_leave(&mut self, client: ClientId, out: &mut Outbox) {
        self.players.remove(&client);
        if self.host == Some(client) {
            self.host = self.players.keys().next().copied();
        }
        self.maybe_end_turn(out);
        self.send_views(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{builtin, UnitKind};

    fn valley() -> ServerScenario {
        builtin("valley").unwrap()
    }

    #[test]
    fn moves_follow_terrain_ownership_and_adjacency() {
        let s = valley();
        let red = NationId(0);
        let inf = s.unit_at(1, 3).unwrap().id;
        assert_eq!(check_move(&s, red, inf, 2, 3), Ok(1));
        assert!(check_move(&s, red, inf, 2, 4)
            .unwrap_err()
            .contains("diagonally"));
        assert!(check_move(&s, red, inf, 3, 3)
            .unwrap_err()
            .contains("one province"));
        assert!(check_move(&s, NationId(1), inf, 2, 3)
            .unwrap_err()
            .contains("not yours"));
        assert!(check_move(&s, red, inf, 1, 4)
            .unwrap_err()
            .contains("your units"));
        let mut s = s;
        s.set_terrain(2, 3, Terrain::Water).unwrap();
        assert!(check_move(&s, red, inf, 2, 3)
            .unwrap_err()
            .contains("water"));
        s.set_terrain(2, 3, Terrain::Mountains).unwrap();
        assert!(check_move(&s, red, inf, 2, 3)
            .unwrap_err()
            .contains("not enough movement"));
    }

    #[test]
    fn attack_strength_and_terrain_decide() {
        let mut s = ServerScenario::new("t", 4, 2).unwrap();
        let a = s.add_nation("A", false).unwrap();
        let b = s.add_nation("B", false).unwrap();
        let inf = s.place_unit(a, UnitKind::Infantry, 0, 0).unwrap();
        let cav = s.place_unit(b, UnitKind::Cavalry, 1, 0).unwrap();
        assert_eq!(
            check_attack(&s, a, inf, cav),
            Ok(true),
            "3 beats 2 on plains"
        );
        s.set_terrain(1, 0, Terrain::Forest).unwrap();
        assert_eq!(
            check_attack(&s, a, inf, cav),
            Ok(false),
            "3 does not beat 2 + 1"
        );
        do_attack(&mut s, inf, cav, false);
        assert!(s.unit(inf).is_none(), "the failed attacker is lost");
        assert_eq!(winner(&s), Some(b));
    }

    #[test]
    fn fog_hides_what_is_far_from_a_nation() {
        let logic = StrategyLogic::new(valley(), false, std::env::temp_dir());
        let view = logic.view(Some(NationId(0)));
        assert!(view.tile(1, 3).is_some(), "around its own units");
        assert!(view.tile(11, 4).is_none(), "the enemy's home is in the fog");
        assert!(
            view.units.iter().all(|u| u.nation == NationId(0)),
            "no enemy unit in sight at the start"
        );
        let spectator = logic.view(None);
        assert!(spectator.tiles.iter().all(Option::is_none) && spectator.units.is_empty());
    }

    #[test]
    fn save_names_are_never_paths() {
        for bad in ["", "../x", "a/b", "UPPER", "x.swst", &"a".repeat(33)] {
            assert!(check_save_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_save_name("turn-3_backup").is_ok());
    }
}
