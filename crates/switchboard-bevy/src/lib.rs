//! # Switchboard in Bevy
//!
//! A client plugin for Bevy apps: the network client is a resource,
//! drained once per frame into Bevy messages that ordinary systems read;
//! the connection is a Bevy state; requests are sent from systems and
//! their verdicts come back as messages; the game's own server runs as a
//! child process of the game when it plays alone or hosts. Rooms are
//! mirrored as entities with the components the game registers, the
//! others' entities drawn smoothly between the states received.
//!
//! Only `bevy_app`, `bevy_ecs` and `bevy_state` are needed, not the
//! engine: a headless server bot or test builds in seconds.
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | `client` | [`SwitchboardPlugin`], the [`Switchboard`] resource (connect, start the local server, request, send, close), the [`NetworkState`] state, the messages [`SwitchboardEvent`], [`RoomMessage`], [`LocalServerStopped`] |
//! | `typed` | [`Received<M>`]: the game's messages decoded (`app.receive::<M>()`) |
//! | `rooms` | [`RoomsPlugin`]: the room's entities mirrored ([`RoomEntity`], [`NetState`]), the game's own created and despawned ([`Replicate`]) |
//! | `replicate` | `app.replicate::<C>(kind)`: a kind's component decoded, sent at its rate, and with `replicate_smoothed` interpolated ([`Smoothed`], [`NetTransform`]) |
//! | `relay` | (feature `relay`, default) [`RelayPlugin`]: the avatar's transform sent to a real-time relay, the zone's other players as entities ([`RelayPlayer`]) drawn interpolated |
//!
//! ## Example
//!
//! A headless client that claims seat 1 of `switchboard-server`'s board
//! and prints the verdict:
//!
//! ```no_run
//! use bevy_app::prelude::*;
//! use bevy_ecs::prelude::*;
//! use bevy_state::prelude::*;
//! use switchboard::ClientConfig;
//! use switchboard_bevy::prelude::*;
//! use switchboard_server::board::Board;
//!
//! fn claim(mut net: NonSendMut<Switchboard>) {
//!     net.request(Board::Claim(1)).expect("online");
//! }
//!
//! fn verdicts(mut events: MessageReader<SwitchboardEvent>, mut exit: MessageWriter<AppExit>) {
//!     for (_, status) in events.read().filter_map(SwitchboardEvent::verdict) {
//!         println!("seat 1: {status:?}");
//!         exit.write(AppExit::Success);
//!     }
//! }
//!
//! App::new()
//!     .add_plugins(bevy_app::ScheduleRunnerPlugin::default())
//!     .add_plugins(SwitchboardPlugin::connect("127.0.0.1:7000", ClientConfig::named("ann")))
//!     .add_systems(OnEnter(NetworkState::Online), claim)
//!     .add_systems(Update, verdicts)
//!     .run();
//! ```
//!
//! Why the server side stays a `GameLogic` and not Bevy systems:
//! `docs/BEVY.md`, "The server".

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod client;
#[cfg(feature = "relay")]
mod relay;
mod replicate;
mod rooms;
mod typed;

pub use client::{
    LocalServerStopped, NetworkState, RoomMessage, Switchboard, SwitchboardEvent,
    SwitchboardPlugin, SwitchboardSystems,
};
pub use replicate::{KindConfig, NetTransform, ReplicateAppExt, Replicated, Smoothed};
pub use rooms::{NetState, Replicate, ReplicationRefused, RoomEntity, RoomMirror, RoomsPlugin};
pub use typed::{ReceiveAppExt, Received};

#[cfg(feature = "relay")]
pub use relay::{Relay, RelayAvatar, RelayEvent, RelayPlayer, RelayPlugin, RelaySettings};

/// What a Bevy game needs in one `use switchboard_bevy::prelude::*;`.
pub mod prelude {
    pub use crate::{
        LocalServerStopped, NetTransform, NetworkState, ReceiveAppExt, Received, Replicate,
        ReplicateAppExt, RoomEntity, RoomMessage, RoomsPlugin, Switchboard, SwitchboardEvent,
        SwitchboardPlugin,
    };
}
