//! The rules of single orders, as plain functions of the scenario: checked
//! first, applied only when valid; and what a nation sees.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};

use crate::scenario::{NationId, ServerScenario, Terrain, UnitId};

/// How far units see (squares, in every direction).
pub const UNIT_SIGHT: i16 = 2;
/// How far owned provinces see.
pub const PROVINCE_SIGHT: i16 = 1;

/// The squares next to (x, y) on the map: units move and attack across
/// edges, never corners.
pub fn neighbours(s: &ServerScenario, x: u8, y: u8) -> impl Iterator<Item = (u8, u8)> + '_ {
    const STEPS: [(i16, i16); 4] = [(1, 0), (-1, 0), (0, 1), (0, -1)];
    STEPS.iter().filter_map(move |(dx, dy)| {
        let (nx, ny) = (x as i16 + dx, y as i16 + dy);
        (nx >= 0 && ny >= 0 && nx < s.width as i16 && ny < s.height as i16)
            .then_some((nx as u8, ny as u8))
    })
}

/// Checks a move to (x, y): the unit goes square by square across edges,
/// the cheapest way over land, through its own nation's units but never
/// an enemy's, and must end on an empty square. Returns what it costs in
/// movement points.
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
    province.terrain.cost().ok_or("units cannot enter water")?;
    match s.unit_at(x, y) {
        Some(other) if other.id == unit => return Err("the unit is there already".into()),
        Some(other) if other.nation == nation => return Err("one of your units is there".into()),
        Some(_) => return Err("an enemy unit is there: attack it".into()),
        None => {}
    }
    cheapest_way(s, nation, (u.x, u.y), (x, y), u.moves_left).ok_or_else(|| {
        format!(
            "not enough movement left ({}) to get there: the way over land, around enemy \
             units, costs more",
            u.moves_left
        )
    })
}

/// The cost of the cheapest way from `from` to `to` within `budget`
/// movement points (Dijkstra, bounded: every step costs at least one, so
/// it looks at no square farther than `budget` steps).
fn cheapest_way(
    s: &ServerScenario,
    nation: NationId,
    from: (u8, u8),
    to: (u8, u8),
    budget: u8,
) -> Option<u8> {
    let mut best: HashMap<(u8, u8), u8> = HashMap::from([(from, 0)]);
    let mut queue = BinaryHeap::from([Reverse((0u8, from))]);
    while let Some(Reverse((spent, at))) = queue.pop() {
        if at == to {
            return Some(spent);
        }
        if best.get(&at).is_some_and(|b| *b < spent) {
            continue;
        }
        for next in neighbours(s, at.0, at.1) {
            let Some(cost) = s.province(next.0, next.1).and_then(|p| p.terrain.cost()) else {
                continue;
            };
            if s.unit_at(next.0, next.1)
                .is_some_and(|o| o.nation != nation)
            {
                continue;
            }
            let total = spent.saturating_add(cost);
            if total > budget || best.get(&next).is_some_and(|b| *b <= total) {
                continue;
            }
            best.insert(next, total);
            queue.push(Reverse((total, next)));
        }
    }
    None
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
