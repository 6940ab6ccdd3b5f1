//! The rules, as the server runs them: orders validated against the
//! scenario, applied only when valid, and each nation told only what it
//! sees.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use switchboard::message::TypedMessage;
use switchboard::{Audience, ClientId, GameLogic, Outbox, Rejection, Request};

mod checkpoint;
mod orders;
mod snapshot;

pub use checkpoint::{CHECKPOINT_MAGIC, CHECKPOINT_VERSION};

pub use orders::{
    check_attack, check_claim, check_move, do_attack, do_claim, do_move, neighbours, sight, winner,
    PROVINCE_SIGHT, UNIT_SIGHT,
};

use crate::ai;
use crate::protocol::{
    GameAct, LobbyAct, LobbyPlayer, LobbyView, Msg, NationStatus, NationView, Seat, TileView,
};
use crate::scenario::{NationId, ServerScenario, UnitId};

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

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Player {
    name: String,
    nation: Option<NationId>,
    ready: bool,
    online: bool,
}

/// The strategy game's server logic.
pub struct StrategyLogic {
    scenario: ServerScenario,
    /// By id: iterations reach updates in the same order every run (a
    /// recording replays exactly).
    players: BTreeMap<ClientId, Player>,
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
            players: BTreeMap::new(),
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
            players: self
                .players
                .values()
                .map(|p| LobbyPlayer {
                    name: p.name.clone(),
                    nation: p.nation,
                    online: p.online,
                })
                .collect(),
        }
    }

    /// Sends every player its own view (and the lobby before the start).
    fn send_views(&self, out: &mut Outbox) {
        for (client, player) in &self.players {
            if !player.online {
                continue;
            }
            let view = self.view(player.nation.filter(|_| self.started));
            out.send(Audience::One(*client), GameAct::View(view));
        }
        out.send(Audience::All, LobbyAct::State(self.lobby()));
    }

    fn tell(&self, nations: &[NationId], text: String, out: &mut Outbox) {
        let clients: Vec<ClientId> = self
            .players
            .iter()
            .filter(|(_, p)| p.nation.is_some_and(|n| nations.contains(&n)))
            .map(|(c, _)| *c)
            .collect();
        if !clients.is_empty() {
            out.send(Audience::Only(clients), GameAct::Event(text));
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
        self.checkpoint(out);
        let turn = self.scenario.turn;
        out.send(Audience::All, GameAct::Event(format!("turn {turn} begins")));
    }
}

impl GameLogic for StrategyLogic {
    type Message = Msg;
    type Command = Command;

    fn validate(&self, request: &Request<Msg>) -> Result<Command, Rejection> {
        let client = request.client;
        let s = &self.scenario;
        match &request.message {
            Msg::Game(GameAct::Move(m)) => {
                let nation = self.nation_of(client)?;
                let cost = check_move(s, nation, m.unit, m.x, m.y).map_err(Rejection::invalid)?;
                Ok(Command::Move(m.unit, m.x, m.y, cost))
            }
            Msg::Game(GameAct::Claim(unit)) => {
                let unit = *unit;
                check_claim(s, self.nation_of(client)?, unit).map_err(Rejection::invalid)?;
                Ok(Command::Claim(unit))
            }
            Msg::Game(GameAct::Attack(a)) => {
                let wins = check_attack(s, self.nation_of(client)?, a.unit, a.target)
                    .map_err(Rejection::invalid)?;
                Ok(Command::Attack(a.unit, a.target, wins))
            }
            Msg::Game(GameAct::EndTurn) => {
                let nation = self.nation_of(client)?;
                if self.ended.contains(&nation) {
                    return reject("you have ended this turn already");
                }
                if winner(s).is_some() {
                    return reject("the game is over");
                }
                Ok(Command::EndTurn(nation))
            }
            Msg::Game(GameAct::Save(name)) => {
                self.nation_of(client)?;
                check_save_name(name).map_err(Rejection::invalid)?;
                Ok(Command::Save(name.clone()))
            }
            Msg::Game(GameAct::Load(name)) => {
                if self.host != Some(client) {
                    return reject("only the host loads games");
                }
                check_save_name(name).map_err(Rejection::invalid)?;
                let path = self.save_dir.join(format!("{name}.swst"));
                let loaded = ServerScenario::load(&path)
                    .map_err(|e| Rejection::invalid(format!("cannot load {name}: {e}")))?;
                Ok(Command::Load(Box::new(loaded)))
            }
            Msg::Lobby(LobbyAct::Pick(nation)) => {
                let nation = *nation;
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
            Msg::Lobby(LobbyAct::Ready(ready)) => {
                let ready = *ready;
                if self.started {
                    return reject("the game has started");
                }
                if self.players.get(&client).and_then(|p| p.nation).is_none() {
                    return reject("pick a nation first");
                }
                Ok(Command::Ready(ready))
            }
            Msg::Lobby(LobbyAct::Start) => {
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
            update => Err(Rejection {
                kind: switchboard::manager::RejectionKind::UnknownAction,
                reason: format!("{} is an update, not a request", update.action_name()),
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
                out.send(Audience::One(client), GameAct::Event(text));
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
                out.send(
                    Audience::All,
                    GameAct::Event(format!("loaded {}", self.scenario.name)),
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
                self.checkpoint(out);
                out.send(Audience::All, GameAct::Event("the game begins".to_string()));
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
        if let Some(player) = self.players.remove(&client) {
            let text = format!("{} left the game", player.name);
            out.send(Audience::All, GameAct::Event(text));
        }
        if self.host == Some(client) {
            self.host = self.players.keys().next().copied();
        }
        self.maybe_end_turn(out);
        self.send_views(out);
    }

    fn snapshot(&self, now: std::time::Instant) -> Result<Vec<u8>, String> {
        self.snapshot_at(now)
    }

    fn restore(&mut self, state: &[u8], now: std::time::Instant) -> Result<(), String> {
        self.restore_at(state, now)
    }

    /// The game, for the operator (and a fleet's probe, `fleet.rs`): its
    /// scenario, players, turn and winner ([`WINNER_FACT`], empty while
    /// the game goes on).
    fn places(&self) -> Vec<switchboard::manager::Place> {
        let s = &self.scenario;
        let winner = winner(s).and_then(|n| s.nation(n)).map(|n| n.name.clone());
        let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
        vec![switchboard::manager::Place {
            name: s.name.clone(),
            members: self.players.keys().copied().collect(),
            facts: vec![
                ("started".into(), yes_no(self.started)),
                ("turn".into(), s.turn.to_string()),
                (WINNER_FACT.into(), winner.unwrap_or_default()),
            ],
        }]
    }
}

/// The fact of [`StrategyLogic`]'s place that names the winner once the
/// game is over.
pub const WINNER_FACT: &str = "winner";

#[cfg(test)]
mod tests;
