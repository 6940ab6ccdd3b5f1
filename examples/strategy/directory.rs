//! Where a game is being served: the master servers' list, filtered by the
//! game's name (its `game` tag). A server resuming a game from its
//! checkpoint lists itself under the same name, so the game's players find
//! it when theirs died.

use std::net::SocketAddr;
use std::time::Duration;

use switchboard_master::{fetch_list, ping_servers, Filter};

/// How long one master may take to answer.
const LIST_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a listed server may take to answer a ping.
const PING_TIMEOUT: Duration = Duration::from_millis(150);

/// The tag a server of a named game carries in its listing.
pub const GAME_TAG: &str = "game";

/// A named game, looked up on these masters.
#[derive(Debug, Clone)]
pub struct Directory {
    /// The masters asked, in turn.
    pub masters: Vec<SocketAddr>,
    /// The game's name.
    pub game: String,
}

impl Directory {
    /// The addresses of the servers listing the game: usually one; for a
    /// while after a crash also the dead one, until its heartbeats have
    /// been missing for the master's expiry. When several are listed, they
    /// are pinged and only those that answer are returned, fastest first
    /// (all of them if none answers): a reconnecting player does not spend
    /// its attempts on the dead one. Asks each master until one answers.
    pub fn servers(&self) -> Result<Vec<String>, String> {
        let filter = Filter {
            game_type: Some("strategy".into()),
            tags: vec![(GAME_TAG.into(), self.game.clone())],
            ..Filter::default()
        };
        let runtime = switchboard::runtime::handle();
        let mut last = format!("no master to ask for game {:?}", self.game);
        for master in &self.masters {
            match runtime.block_on(fetch_list(*master, filter.clone(), LIST_TIMEOUT)) {
                Ok(listed) if listed.len() > 1 => {
                    let all: Vec<String> = listed.iter().map(|l| l.addr.to_string()).collect();
                    let pinged = runtime.block_on(ping_servers(listed, 8, PING_TIMEOUT, 0));
                    let alive: Vec<String> = pinged
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|b| b.ping.is_some())
                        .map(|b| b.listed.addr.to_string())
                        .collect();
                    return Ok(if alive.is_empty() { all } else { alive });
                }
                Ok(listed) => return Ok(listed.iter().map(|l| l.addr.to_string()).collect()),
                Err(err) => last = format!("master {master}: {err}"),
            }
        }
        Err(last)
    }
}
