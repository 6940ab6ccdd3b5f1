//! The scenarios that ship with the game.

use super::*;

/// The shipped scenarios, built in code (and also saved as files under
/// `examples/strategy/scenarios/` by `--edit ... --script`).
pub fn builtin(name: &str) -> Option<ServerScenario> {
    match name {
        "valley" => Some(valley()),
        "islands" => Some(islands()),
        _ => None,
    }
}

/// Two nations across a small valley with hills and a river.
fn valley() -> ServerScenario {
    let mut s = ServerScenario::new("The Valley", 12, 8).expect("valid size");
    for y in 0..8 {
        s.set_terrain(
            6,
            y,
            if y == 3 || y == 4 {
                Terrain::Plains
            } else {
                Terrain::Water
            },
        )
        .unwrap();
    }
    for (x, y) in [(3, 1), (4, 1), (8, 6), (9, 6)] {
        s.set_terrain(x, y, Terrain::Hills).unwrap();
    }
    for (x, y) in [(2, 5), (3, 5), (9, 2), (10, 2)] {
        s.set_terrain(x, y, Terrain::Forest).unwrap();
    }
    s.set_terrain(11, 0, Terrain::Mountains).unwrap();
    let red = s.add_nation("Red", false).unwrap();
    let blue = s.add_nation("Blue", true).unwrap();
    s.set_owner(0, 3, Some(red)).unwrap();
    s.set_owner(11, 4, Some(blue)).unwrap();
    s.place_unit(red, UnitKind::Infantry, 1, 3).unwrap();
    s.place_unit(red, UnitKind::Cavalry, 1, 4).unwrap();
    s.place_unit(blue, UnitKind::Infantry, 10, 4).unwrap();
    s.place_unit(blue, UnitKind::Cavalry, 10, 3).unwrap();
    s
}

/// Three nations on islands joined by land bridges.
fn islands() -> ServerScenario {
    let mut s = ServerScenario::new("The Islands", 14, 10).expect("valid size");
    for y in 0..10 {
        for x in 0..14 {
            let north = x < 5 && y < 5;
            let east = x > 8 && y < 5;
            let south = y > 5 && (3..11).contains(&x);
            let bridge = [(5, 2), (6, 2), (7, 2), (8, 2), (4, 5), (9, 5)].contains(&(x, y));
            if !(north || east || south || bridge) {
                s.set_terrain(x, y, Terrain::Water).unwrap();
            }
        }
    }
    s.set_terrain(1, 1, Terrain::Mountains).unwrap();
    s.set_terrain(12, 1, Terrain::Forest).unwrap();
    s.set_terrain(7, 8, Terrain::Hills).unwrap();
    let north = s.add_nation("North", false).unwrap();
    let east = s.add_nation("East", true).unwrap();
    let south = s.add_nation("South", true).unwrap();
    s.set_owner(0, 0, Some(north)).unwrap();
    s.set_owner(13, 0, Some(east)).unwrap();
    s.set_owner(7, 9, Some(south)).unwrap();
    s.place_unit(north, UnitKind::Infantry, 2, 2).unwrap();
    s.place_unit(north, UnitKind::Cavalry, 3, 3).unwrap();
    s.place_unit(east, UnitKind::Infantry, 11, 2).unwrap();
    s.place_unit(east, UnitKind::Cavalry, 10, 3).unwrap();
    s.place_unit(south, UnitKind::Infantry, 6, 7).unwrap();
    s.place_unit(south, UnitKind::Cavalry, 8, 7).unwrap();
    s
}
