//! The dedicated Switchboard server's library side: the built-in board game
//! its default mode runs (and that the tests and the `local_game` example
//! use as a small, complete `GameLogic`).
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | [`board`] | the built-in game: a shared board of keys and values, seats, chat, whispers |
//! | [`requests`] | the manager path's load test: clients sending requests that are broadcast to all |

#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod board;
pub mod requests;
