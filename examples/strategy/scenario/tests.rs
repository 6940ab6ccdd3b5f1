//! Unit tests of `scenario`.

use super::*;

#[test]
fn shipped_scenario_files_load_and_match_the_builtin_ones() {
    for name in ["valley", "islands"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{name}.swst"));
        let loaded = ServerScenario::load(&path).unwrap();
        assert_eq!(loaded, builtin(name).unwrap(), "{name}");
    }
}

#[test]
fn edits_that_would_break_the_rules_are_refused() {
    let mut s = ServerScenario::new("t", 4, 4).unwrap();
    let a = s.add_nation("A", false).unwrap();
    s.place_unit(a, UnitKind::Infantry, 1, 1).unwrap();
    assert!(
        s.set_terrain(1, 1, Terrain::Water).is_err(),
        "no water under a unit"
    );
    s.set_owner(2, 2, Some(a)).unwrap();
    assert!(
        s.set_terrain(2, 2, Terrain::Water).is_err(),
        "no owned water"
    );
    assert!(
        s.set_owner(3, 3, Some(NationId(9))).is_err(),
        "owner must exist"
    );
    assert!(
        s.place_unit(a, UnitKind::Cavalry, 1, 1).is_err(),
        "one unit per province"
    );
    s.set_terrain(0, 0, Terrain::Water).unwrap();
    assert!(
        s.place_unit(a, UnitKind::Cavalry, 0, 0).is_err(),
        "no unit on water"
    );
    assert!(
        s.place_unit(a, UnitKind::Cavalry, 9, 0).is_err(),
        "on the map"
    );
    assert!(s.add_nation("A", true).is_err(), "unique names");
    s.validate().unwrap();
}

#[test]
fn save_load_and_broken_files() {
    let dir = std::env::temp_dir().join(format!("strategy-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("valley.swst");
    let valley = builtin("valley").unwrap();
    valley.save(&path).unwrap();
    assert_eq!(ServerScenario::load(&path).unwrap(), valley);

    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    assert!(matches!(
        ServerScenario::load(&path),
        Err(ScenarioError::Truncated { .. })
    ));
    let mut other_version = bytes.clone();
    other_version[5] = 9;
    std::fs::write(&path, &other_version).unwrap();
    assert!(matches!(
        ServerScenario::load(&path),
        Err(ScenarioError::WrongVersion { found: 9, .. })
    ));
    let mut invalid = valley.clone();
    invalid.units[0].x = 6;
    invalid.units[0].y = 0; // water
    scenario::save(&path, MAGIC, FORMAT_VERSION, &invalid).unwrap();
    assert!(matches!(
        ServerScenario::load(&path),
        Err(ScenarioError::Invalid(_))
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}
