//! The real-time relay: players' transforms relayed at 10–20 Hz to the other
//! players in the same zone, stamped by the server with the sender and the
//! time. Native clients speak Switchboard on channel 3; JSON clients speak
//! newline-delimited JSON on an optional compatibility listener, and both
//! see each other.
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | `hub` | [`Relay`]: zones, stamped transforms, who hears what (no IO, time passed in); `hub/distance.rs`: the same with interest by distance inside zones; `hub/budget.rs`: each player's transform budget and strikes; `hub/snapshot.rs`: the core as a recording started mid-session begins with it; `hub/types.rs`: what the core hands out (players as copies, events, counters) |
//! | [`interest`] | [`World`](interest::World): a zone's players in a spatial hash, views with enter and leave radii, rates by distance band (no IO) |
//! | `server` | [`RelayServer`] started by its [`RelayBuilder`] as a [`RunningRelay`], [`RelayConfig`], [`RelayHandle`]: the relay's settings and its running handle; `server/messages.rs`: what travels on the relay channel ([`RelayAction`] and its contents) |
//! | `dispatch` | the relay's one task: events in, the hub, deliveries paced out (`switchboard::socket::Pacer`); `dispatch/deliver.rs`: one event to its recipients; `dispatch/batch.rs`: batches and compact streams per player; `dispatch/handover.rs`: players routed to their zone's relay |
//! | `json` | the JSON-lines listener: connection caps, line limits, queues bounded in lines and bytes |
//! | `admin` | the relay for its admin server (`switchboard::admin::AdminSource`): players, zones, counters, kick |
//! | `transform` | [`Transform`] and its limits, JSON and native forms |
//! | [`client_core`] | [`RelayClientCore`](client_core::RelayClientCore): the client side without IO (hello or handover ticket, options, every form the relay writes read into events, transforms read in place with `Heard::peek`), driven by the bots, the load tester (`switchboard-load`) and the Bevy plugin |
//! | `bots` | scripted [`Bot`]s that move like players (on the client core), started by the operator from the admin page |
//! | [`compact`] | compact transforms: quantized, as differences, senders and zones as small numbers ([`CompactEncoder`](compact::CompactEncoder) in the relay, [`CompactDecoder`](compact::CompactDecoder) in a client) |
//! | `wire` | bincode's varints by hand, for the paths that read and write in place |
//! | [`record`] | recording the core's calls off its path ([`RelayRecorder`](record::RelayRecorder)) and replaying them on a fresh core ([`replay`](record::replay)) |
//! | `zones` | zones across relay processes: [`ZoneRouting`], the directory's trait, handover tickets |

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod admin;
mod bots;
pub mod client_core;
pub mod compact;
mod dispatch;
mod hub;
pub mod interest;
mod json;
mod log;
pub mod record;
mod server;
mod transform;
mod wire;
mod zones;

pub use admin::{RelayAdmin, MAX_ADMIN_BOTS};
pub use bots::{Bot, BotConfig, Script};
/// Why a relay's recording did not start (`RelayHandle::start_recording`):
/// the manager's, with the relay's snapshot error.
pub type StartRecordingError = switchboard::manager::StartRecordingError<RelaySnapshotError>;
pub use hub::{
    Link, Outgoing, Relay, RelayClient, RelayEvent, RelayLimits, RelaySnapshotError, RelayStats,
    ID_BITS, QUEUE_WAIT_BOUNDS_MICROS,
};
pub use log::RelayLogLine;
pub use server::{
    Batch, NotABool, RelayAction, RelayBuilder, RelayChannel, RelayConfig, RelayHandle, RelayHello,
    RelayMovesChannel, RelayOptions, RelayServer, RelayViewChannel, Relayed, RunningRelay,
    RELAY_CHANNEL,
};
pub use transform::{MovementState, Transform, TransformError, MAX_EXTRA, MAX_EXTRA_LEN, MAX_ZONE};
pub use zones::{
    Handover, Redirect, RedirectForm, ZoneDirectory, ZoneFuture, ZoneOwner, ZoneRouting,
};
