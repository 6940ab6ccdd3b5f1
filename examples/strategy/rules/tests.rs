//! Unit tests of `rules`.

use super::*;
use crate::scenario::Terrain;
use crate::scenario::{builtin, UnitKind};

fn valley() -> ServerScenario {
    builtin("valley").unwrap()
}

#[test]
fn moves_go_square_by_square_the_cheapest_way_within_the_units_movement() {
    let s = valley();
    let red = NationId(0);
    let inf = s.unit_at(1, 3).unwrap().id; // infantry: 2 moves
    assert_eq!(check_move(&s, red, inf, 2, 3), Ok(1));
    assert_eq!(
        check_move(&s, red, inf, 3, 3),
        Ok(2),
        "two squares straight"
    );
    assert_eq!(
        check_move(&s, red, inf, 2, 4),
        Ok(2),
        "a corner is two steps"
    );
    assert_eq!(
        check_move(&s, red, inf, 1, 5),
        Ok(2),
        "through its own cavalry at (1, 4)"
    );
    assert!(check_move(&s, red, inf, 4, 3)
        .unwrap_err()
        .contains("not enough movement left (2)"));
    assert!(check_move(&s, NationId(1), inf, 2, 3)
        .unwrap_err()
        .contains("not yours"));
    assert!(check_move(&s, red, inf, 1, 4)
        .unwrap_err()
        .contains("your units"));
    assert!(check_move(&s, red, inf, 1, 3)
        .unwrap_err()
        .contains("there already"));
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
fn moves_never_pass_an_enemy_unit() {
    let mut s = valley();
    let red = NationId(0);
    let inf = s.unit_at(1, 3).unwrap().id;
    assert_eq!(check_move(&s, red, inf, 3, 3), Ok(2));
    s.place_unit(NationId(1), UnitKind::Infantry, 2, 3).unwrap();
    // The way round, (1, 2) (2, 2) (3, 2) (3, 3), costs 4.
    assert!(check_move(&s, red, inf, 3, 3)
        .unwrap_err()
        .contains("around enemy units"));
    assert!(check_move(&s, red, inf, 2, 3)
        .unwrap_err()
        .contains("attack it"));
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

#[test]
fn a_completed_turn_is_checkpointed_and_resumes_with_the_same_players_on_the_same_nations() {
    let mut logic = StrategyLogic::new(valley(), false, std::env::temp_dir());
    let (ada, bob) = (ClientId::from_u128(1), ClientId::from_u128(2));
    let mut out = Outbox::default();
    logic.on_join(ada, "ada", &mut out);
    logic.on_join(bob, "bob", &mut out);
    assert!(out.take_checkpoint().is_none(), "no turn completed yet");
    let nations = |l: &StrategyLogic| {
        let mut seated: Vec<(ClientId, Option<NationId>)> =
            l.players.iter().map(|(c, p)| (*c, p.nation)).collect();
        seated.sort();
        seated
    };
    let before = nations(&logic);
    assert!(logic.players[&ada].nation.is_some(), "ada plays a nation");
    for client in [ada, bob] {
        // Bob may be a spectator: the valley has as many seats as humans.
        if let Some(nation) = logic.players[&client].nation {
            logic.apply(client, Command::EndTurn(nation), &mut out);
        }
    }
    let bytes = out
        .take_checkpoint()
        .expect("the completed turn's checkpoint");
    assert_eq!(logic.scenario.turn, 2);

    let resumed = StrategyLogic::resume(&bytes, std::env::temp_dir()).unwrap();
    assert_eq!(resumed.scenario.turn, 2);
    assert_eq!(nations(&resumed), before);
    assert!(resumed.started);
    assert!(
        resumed.players.values().all(|p| !p.online),
        "away until they reconnect"
    );
    // A damaged checkpoint is an error, not a game.
    let mut damaged = bytes.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0xFF;
    assert!(StrategyLogic::resume(&damaged, std::env::temp_dir()).is_err());
}

#[test]
fn the_game_s_place_names_its_winner_once_the_game_is_over() {
    let fact = |logic: &StrategyLogic| {
        let places = logic.places();
        let (_, value) = places[0]
            .facts
            .iter()
            .find(|(fact, _)| fact == WINNER_FACT)
            .cloned()
            .expect("a winner fact");
        value
    };
    assert_eq!(
        fact(&StrategyLogic::new(valley(), false, std::env::temp_dir())),
        ""
    );
    let mut s = ServerScenario::new("t", 4, 2).unwrap();
    let a = s.add_nation("A", false).unwrap();
    s.add_nation("B", false).unwrap();
    s.place_unit(a, UnitKind::Infantry, 0, 0).unwrap();
    let won = StrategyLogic::new(s.clone(), false, std::env::temp_dir());
    assert_eq!(winner(&s), Some(a));
    assert_eq!(fact(&won), "A");
}
