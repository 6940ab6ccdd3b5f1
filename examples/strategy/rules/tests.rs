//! Unit tests of `rules`.

use super::*;
use crate::scenario::Terrain;
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
