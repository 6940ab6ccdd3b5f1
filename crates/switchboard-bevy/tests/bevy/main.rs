//! The Bevy plugin's tests, one binary (one link, one build of the shared
//! helpers): Bevy apps against real server processes.
//!
//! | module | what it shows |
//! |---|---|
//! | `client` | joining, the connection state, verdicts, typed messages, a reconnect through a cut with the same id, the local server with the app, a late frame |
//! | `rooms` | room entities appearing, moving (interpolated), going; late joiners, cuts, ownership |
//! | `relay` | the relay's players as entities, zones, a relay coming back |
//! | `examples` | the examples run as documented |

#[path = "../../../../tests/common/mod.rs"]
mod common;
mod support;

mod client;
mod examples;
#[cfg(feature = "relay")]
mod relay;
mod rooms;
