//! Rooms in Bevy apps against a real rooms server process: a player's
//! entity appears in the other's world, moves smoothly and goes; a late
//! joiner and a player cut off get the room's entities back; ownership
//! passes with `Replicate`.

use bevy_app::prelude::*;
use bevy_ecs::prelude::*;
use switchboard::client::{ClientEvent, RequestStatus, RequestTicket};
use switchboard_bevy::prelude::*;
use switchboard_bevy::{RoomMirror, Smoothed};
use switchboard_rooms::{CreateRoom, RoomClient, RoomId};

use crate::support::{app, config, frames, id, rooms_server, seen, state, Proxy};

fn rooms_app(addr: impl ToString, name: &str) -> App {
    let mut app = app(SwitchboardPlugin::connect(addr, config(name)));
    app.add_plugins(RoomsPlugin)
        .replicate_smoothed::<NetTransform>("ship");
    app
}

fn online(apps: &mut [&mut App]) {
    frames(apps, |a| a.iter().all(|a| state(a) == NetworkState::Online));
}

/// Asks through the app's rooms client and runs frames until the verdict,
/// which must be `Accepted`.
fn accepted(
    apps: &mut [&mut App],
    who: usize,
    send: impl FnOnce(&mut RoomClient) -> RequestTicket,
) {
    let ticket = {
        let mut net = apps[who].world_mut().non_send_mut::<Switchboard>();
        send(net.rooms().unwrap())
    };
    let find = |app: &App| {
        seen(app).events.iter().find_map(|e| match e {
            ClientEvent::RequestDone { ticket: t, status } if *t == ticket => Some(status.clone()),
            _ => None,
        })
    };
    frames(apps, |a| find(a[who]).is_some());
    assert_eq!(find(apps[who]), Some(RequestStatus::Accepted));
}

fn room(name: &str) -> CreateRoom {
    CreateRoom {
        name: name.into(),
        max_players: 4,
        metadata: Default::default(),
        private: false,
    }
}

fn room_id(app: &mut App) -> RoomId {
    let mut net = app.world_mut().non_send_mut::<Switchboard>();
    net.rooms().unwrap().room_ref().unwrap().id
}

/// The room entities of `kind` this app sees, with their transforms.
fn ships(app: &mut App) -> Vec<(RoomEntity, Option<NetTransform>, bool)> {
    let mut query = app
        .world_mut()
        .query::<(&RoomEntity, Option<&NetTransform>, Has<Replicate>)>();
    let mut all: Vec<_> = query
        .iter(app.world())
        .map(|(e, t, mine)| (e.clone(), t.copied(), mine))
        .collect();
    all.sort_by_key(|(e, _, _)| e.id.0);
    all
}

fn ship_at(x: f32) -> NetTransform {
    NetTransform {
        position: [x, 0.0, 0.0],
        rotation: [0.0, 0.0, 0.0],
    }
}

/// Ann creates a room of `server`, bob joins it.
fn ann_and_bob_in_a_room(server: &switchboard::LocalServer) -> (App, App) {
    let mut ann = rooms_app(server.addr(), "ann");
    let mut bob = rooms_app(server.addr(), "bob");
    online(&mut [&mut ann, &mut bob]);
    accepted(&mut [&mut ann, &mut bob], 0, |r| {
        r.create(&room("den")).unwrap()
    });
    let den = room_id(&mut ann);
    accepted(&mut [&mut ann, &mut bob], 1, |r| r.join(den).unwrap());
    (ann, bob)
}

#[test]
fn room_entities_appear_move_smoothly_and_go() {
    let server = rooms_server();
    let (mut ann, mut bob) = ann_and_bob_in_a_room(&server);

    // Ann's game spawns its ship as any entity, marked to replicate.
    let local = ann.world_mut().spawn((ship_at(0.0), Replicate)).id();
    frames(&mut [&mut ann, &mut bob], |a| {
        ships(a[0]).len() == 1 && ships(a[1]).len() == 1
    });
    let (theirs, transform, mine) = ships(&mut bob)[0].clone();
    assert_eq!(theirs.kind, "ship");
    assert_eq!(Some(theirs.owner), id(&ann));
    assert_eq!(transform, Some(ship_at(0.0)));
    assert!(!mine, "bob does not own ann's ship");
    // Ann's own entity is linked, not doubled.
    assert_eq!(ships(&mut ann).len(), 1);
    assert_eq!(
        ann.world().resource::<RoomMirror>().entity(theirs.id),
        Some(local)
    );

    // Ann moves it a little every frame; bob sees it follow, drawn from
    // his buffer between the states sent at 20 Hz.
    let mut x = 0.0;
    frames(&mut [&mut ann, &mut bob], |a| {
        if x < 10.0 {
            x += 0.05;
            a[0].world_mut()
                .get_mut::<NetTransform>(local)
                .unwrap()
                .position[0] = x;
        }
        ships(a[1])[0].1.unwrap().position[0] >= 9.99
    });
    let smoothed = {
        let mut query = bob.world_mut().query::<&Smoothed<NetTransform>>();
        query.single(bob.world()).unwrap().stats()
    };
    assert!(smoothed.interpolated > 0, "{smoothed:?}");

    // Ann despawns it in her game; it goes from bob's.
    ann.world_mut().despawn(local);
    frames(&mut [&mut ann, &mut bob], |a| ships(a[1]).is_empty());
    assert!(bob.world().resource::<RoomMirror>().is_empty());
}

#[test]
fn a_late_joiner_and_a_player_cut_off_get_the_rooms_entities() {
    let server = rooms_server();
    let proxy = Proxy::start(server.addr());
    let mut ann = rooms_app(server.addr(), "ann");
    let mut bob = rooms_app(proxy.addr, "bob");
    online(&mut [&mut ann, &mut bob]);
    accepted(&mut [&mut ann, &mut bob], 0, |r| {
        r.create(&room("den")).unwrap()
    });
    let den = room_id(&mut ann);
    for x in [1.0, 2.0, 3.0] {
        ann.world_mut().spawn((ship_at(x), Replicate));
    }
    frames(&mut [&mut ann], |a| ships(a[0]).len() == 3);

    // Bob joins late: the room's state brings all three.
    accepted(&mut [&mut ann, &mut bob], 1, |r| r.join(den).unwrap());
    frames(&mut [&mut ann, &mut bob], |a| ships(a[1]).len() == 3);
    let xs: Vec<f32> = ships(&mut bob)
        .iter()
        .map(|(_, t, _)| t.unwrap().position[0])
        .collect();
    assert_eq!(xs, [1.0, 2.0, 3.0]);

    // Bob is cut off; meanwhile ann's first ship goes and a fourth comes.
    proxy.cut();
    frames(&mut [&mut ann, &mut bob], |a| {
        state(a[1]) == NetworkState::Reconnecting
    });
    let first_id = ships(&mut ann)[0].0.id;
    let first = ann.world().resource::<RoomMirror>().entity(first_id);
    ann.world_mut().despawn(first.unwrap());
    ann.world_mut().spawn((ship_at(4.0), Replicate));
    frames(&mut [&mut ann, &mut bob], |a| {
        state(a[1]) == NetworkState::Online && {
            let xs: Vec<f32> = ships(a[1])
                .iter()
                .map(|(_, t, _)| t.unwrap().position[0])
                .collect();
            xs == [2.0, 3.0, 4.0]
        }
    });
}

#[test]
fn ownership_passes_with_replicate() {
    let server = rooms_server();
    let (mut ann, mut bob) = ann_and_bob_in_a_room(&server);
    ann.world_mut().spawn((ship_at(5.0), Replicate));
    frames(&mut [&mut ann, &mut bob], |a| ships(a[1]).len() == 1);
    let ship = ships(&mut bob)[0].0.id;
    let bob_id = id(&bob).unwrap();

    accepted(&mut [&mut ann, &mut bob], 0, |r| {
        r.transfer(ship, bob_id).unwrap()
    });
    frames(&mut [&mut ann, &mut bob], |a| {
        ships(a[1])[0].2 && !ships(a[0])[0].2
    });

    // Now bob's changes are the ones that travel.
    let on_bob = bob.world().resource::<RoomMirror>().entity(ship).unwrap();
    bob.world_mut()
        .get_mut::<NetTransform>(on_bob)
        .unwrap()
        .position[0] = 7.0;
    frames(&mut [&mut ann, &mut bob], |a| {
        ships(a[0])[0].1.unwrap().position[0] == 7.0
    });
}

#[test]
fn an_entity_despawned_before_the_room_had_it_goes_from_the_room_too() {
    let server = rooms_server();
    let (mut ann, mut bob) = ann_and_bob_in_a_room(&server);
    let accepted = |app: &App| {
        seen(app)
            .events
            .iter()
            .filter(|e| {
                matches!(e, ClientEvent::RequestDone { status, .. } if *status == RequestStatus::Accepted)
            })
            .count()
    };
    let before = accepted(&ann);
    // Ann's game spawns a ship and despawns it at once: the spawn was
    // asked for, the room has not answered yet.
    let ship = ann.world_mut().spawn((ship_at(1.0), Replicate)).id();
    ann.update();
    ann.world_mut().despawn(ship);
    // The room takes it (the spawn is accepted), then loses it: nobody
    // keeps it.
    frames(&mut [&mut ann, &mut bob], |a| accepted(a[0]) > before);
    frames(&mut [&mut ann, &mut bob], |a| {
        let net = a[0].world().non_send::<Switchboard>();
        net.room().is_some_and(|room| room.entities.is_empty())
            && a[0].world().resource::<RoomMirror>().is_empty()
    });
    frames(&mut [&mut ann, &mut bob], |a| ships(a[1]).is_empty());
    // And stays gone.
    for _ in 0..20 {
        bob.update();
    }
    assert!(ships(&mut bob).is_empty());
}
