//! The reference game of Switchboard: a small turn-based strategy game.
//!
//! | module | owns |
//! |---|---|
//! | [`scenario`] | `ServerScenario`: the authoritative state as plain data, its edits and its file |
//! | [`rules`] | the server's `GameLogic`: orders validated, applied, and each nation's view |
//! | [`ai`] | the nations the server plays |
//! | [`protocol`] | channels, actions and the messages between client and server |
//! | [`client`] | the connection, the typed interface and the scripted bot player |
//! | [`directory`] | where a named game is served now (the master servers' list) |
//! | `rejoin` | what a player is told when its connection comes back: the same game, or what was lost |
//! | [`tui`] | the full-screen game screen |
//! | [`editor`] | the scenario editor (no network, no server) and its full-screen screen |

pub mod ai;
pub mod client;
pub mod directory;
pub mod editor;
pub mod protocol;
mod rejoin;
pub mod replay;
pub mod rules;
pub mod scenario;
pub mod tui;
