//! A simple AI: attack what it can beat, claim where it stands, walk toward
//! the nearest province it does not own. It plays by the same rule checks as
//! human orders.

use std::collections::VecDeque;

use crate::rules::{
    check_attack, check_claim, check_move, do_attack, do_claim, do_move, neighbours,
};
use crate::scenario::{NationId, ServerScenario, UnitId};

/// Plays one turn for `nation`; returns what happened, for its own players.
pub fn play(s: &mut ServerScenario, nation: NationId) -> Vec<String> {
    let mut events = Vec::new();
    let units: Vec<UnitId> = s
        .units
        .iter()
        .filter(|u| u.nation == nation)
        .map(|u| u.id)
        .collect();
    for unit in units {
        // A unit may have been destroyed by an earlier failed attack.
        while let Some(u) = s.unit(unit).copied() {
            if u.moves_left == 0 {
                break;
            }
            if let Some(target) = beatable_neighbour(s, nation, unit) {
                do_attack(s, unit, target, true);
                events.push(format!("AI unit {} destroyed unit {}", unit.0, target.0));
                break;
            }
            if check_claim(s, nation, unit).is_ok() {
                do_claim(s, unit);
                events.push(format!("AI unit {} claimed ({}, {})", unit.0, u.x, u.y));
                break;
            }
            match next_step(s, nation, unit) {
                Some((x, y, cost)) => do_move(s, unit, x, y, cost),
                None => break,
            }
        }
    }
    events
}

fn beatable_neighbour(s: &ServerScenario, nation: NationId, unit: UnitId) -> Option<UnitId> {
    let u = s.unit(unit)?;
    neighbours(s, u.x, u.y)
        .filter_map(|(x, y)| s.unit_at(x, y))
        .find(|t| t.nation != nation && check_attack(s, nation, unit, t.id) == Ok(true))
        .map(|t| t.id)
}

/// The first step of a shortest land path to the nearest province `nation`
/// does not own, if that step is affordable now.
fn next_step(s: &ServerScenario, nation: NationId, unit: UnitId) -> Option<(u8, u8, u8)> {
    let u = s.unit(unit)?;
    let w = s.width as usize;
    let mut first: Vec<Option<(u8, u8)>> = vec![None; s.provinces.len()];
    let mut seen = vec![false; s.provinces.len()];
    let mut queue = VecDeque::new();
    seen[u.y as usize * w + u.x as usize] = true;
    queue.push_back((u.x, u.y));
    while let Some((x, y)) = queue.pop_front() {
        for (nx, ny) in neighbours(s, x, y) {
            let i = ny as usize * w + nx as usize;
            let province = s.provinces[i];
            if seen[i] || province.terrain.cost().is_none() || s.unit_at(nx, ny).is_some() {
                continue;
            }
            seen[i] = true;
            let step = first[y as usize * w + x as usize].unwrap_or((nx, ny));
            first[i] = Some(step);
            if province.owner != Some(nation) {
                let (sx, sy) = step;
                return check_move(s, nation, unit, sx, sy)
                    .ok()
                    .map(|cost| (sx, sy, cost));
            }
            queue.push_back((nx, ny));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::builtin;

    #[test]
    fn ai_claims_and_expands_within_the_rules() {
        let mut s = builtin("valley").unwrap();
        let blue = NationId(1);
        let before = s.provinces.iter().filter(|p| p.owner == Some(blue)).count();
        for _ in 0..5 {
            play(&mut s, blue);
            for unit in &mut s.units {
                unit.moves_left = unit.kind.moves();
            }
            s.validate().unwrap();
        }
        let after = s.provinces.iter().filter(|p| p.owner == Some(blue)).count();
        assert!(
            after > before,
            "the AI grew from {before} to {after} provinces"
        );
    }
}
