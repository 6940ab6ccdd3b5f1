//! The server's side of the rules: the session protocol's messages, the
//! game's logic (what a request is, what it may answer, where updates go)
//! and the counters a server keeps. The manager core itself is still in
//! `switchboard` (issue 31 moves it here next).

pub mod logic;
pub mod protocol;
pub mod stats;
