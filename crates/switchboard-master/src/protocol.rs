//! The master server's messages.
//!
//! Datagrams (UDP) between game servers, the master and browsers:
//!
//! ```text
//! +--------+---------+------+----------------------+
//! | "SWMS" | version | kind | bincode body         |
//! | 4 B    | u8 = 1  | u8   | (depends on kind)    |
//! +--------+---------+------+----------------------+
//! ```
//!
//! The list of servers travels over a normal Switchboard connection (TCP),
//! so that a forged source address cannot make the master send a long list
//! to a victim: every datagram the master sends is no larger than the one
//! that caused it, and is rate-limited per address.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use switchboard::codec;

mod listed;
pub use listed::{Listed, ListedTransport, Offered, JOIN_TAG};

/// The first bytes of every datagram.
pub const MAGIC: [u8; 4] = *b"SWMS";
/// The datagram format version (2: heartbeats carry padding).
pub const VERSION: u8 = 2;
/// The largest datagram read or sent.
pub const MAX_DATAGRAM: usize = 1200;

/// Limits on what a server may announce about itself.
pub const MAX_TEXT: usize = 64;
/// The most tags.
pub const MAX_TAGS: usize = 16;

/// What a game server says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ServerInfo {
    /// Its name.
    pub name: String,
    /// The game it runs.
    pub game_type: String,
    /// The scenario or mission.
    pub scenario: String,
    /// Players connected.
    pub players: u16,
    /// Players it takes.
    pub max_players: u16,
    /// Bots among the players.
    pub bots: u16,
    /// Whether joining needs a password.
    pub password: bool,
    /// Whether it is a dedicated server (not a player's hosted game).
    pub dedicated: bool,
    /// The game's version.
    pub version: String,
    /// Where it is (free text, e.g. "eu-west").
    pub region: String,
    /// Free-form key = value pairs.
    pub tags: Vec<(String, String)>,
}

/// Why a listing or a list request's filter breaks the master's limits
/// ([`ServerInfo::check`], [`Filter::check`]); its text is what the peer
/// is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ListingError {
    /// A text of this many bytes (the limit is [`MAX_TEXT`]).
    #[error("a text of {0} bytes (the limit is {MAX_TEXT})")]
    TextTooLong(usize),
    /// Control characters in a text.
    #[error("control characters in a text")]
    ControlCharacters,
    /// This many tags (the limit is [`MAX_TAGS`]).
    #[error("{0} tags (the limit is {MAX_TAGS})")]
    TooManyTags(usize),
    /// More players than places, or more bots than players.
    #[error("player counts do not add up")]
    PlayerCounts,
    /// A filter of this many tags (the limit is [`MAX_TAGS`]).
    #[error("a filter of {0} tags (the limit is {MAX_TAGS})")]
    FilterTooManyTags(usize),
    /// A filter text of this many bytes (the limit is [`MAX_TEXT`]).
    #[error("a filter text of {0} bytes (the limit is {MAX_TEXT})")]
    FilterTextTooLong(usize),
}

impl ServerInfo {
    /// Checks the limits: texts of at most [`MAX_TEXT`] bytes, at most
    /// [`MAX_TAGS`] tags, no control characters.
    pub fn check(&self) -> Result<(), ListingError> {
        let texts = [
            &self.name,
            &self.game_type,
            &self.scenario,
            &self.version,
            &self.region,
        ];
        let tag_texts = self.tags.iter().flat_map(|(k, v)| [k, v]);
        for text in texts.into_iter().chain(tag_texts) {
            if text.len() > MAX_TEXT {
                return Err(ListingError::TextTooLong(text.len()));
            }
            if text.chars().any(char::is_control) {
                return Err(ListingError::ControlCharacters);
            }
        }
        if self.tags.len() > MAX_TAGS {
            return Err(ListingError::TooManyTags(self.tags.len()));
        }
        if self.players > self.max_players || self.bots > self.players {
            return Err(ListingError::PlayerCounts);
        }
        Ok(())
    }
}

/// One datagram.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Datagram {
    /// Game server → master: I am here (from the game's own port). Padded
    /// ([`heartbeat`]) to at least the length of the query it triggers, so
    /// that a forged one cannot make the master send more than it got.
    Heartbeat {
        /// Zeros, ignored.
        padding: Vec<u8>,
    },
    /// Master or browser → game server: your info, with this challenge.
    /// A game server answers a query that is not from one of its masters
    /// only when the query is at least as long as the answer (a browser pads
    /// it), so that it cannot be used to amplify traffic.
    InfoQuery {
        /// Random; the reply must carry it back.
        challenge: u64,
        /// Padding, ignored.
        padding: Vec<u8>,
    },
    /// Game server → master or browser: my info, for this challenge.
    InfoReply {
        /// The challenge of the query.
        challenge: u64,
        /// The info.
        info: ServerInfo,
    },
    /// Browser → game server: how far are you?
    Ping {
        /// Echoed in the pong.
        nonce: u64,
    },
    /// Game server → browser.
    Pong {
        /// The ping's nonce.
        nonce: u64,
    },
    /// Game server → master: I am stopping, take me off the list now. It
    /// carries the challenge of the master's last query that the server
    /// answered, which only the two of them know: a forged goodbye changes
    /// nothing.
    Goodbye {
        /// The master's last challenge to this server.
        challenge: u64,
    },
}

/// Why a datagram was dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DatagramError {
    /// Too short, or not starting with the magic.
    #[error("not a master-server datagram")]
    NotOurs,
    /// Another format version.
    #[error("datagram version {0}")]
    Version(u8),
    /// The body did not decode.
    #[error("bad datagram body: {0}")]
    Body(String),
}

/// Encodes a datagram.
pub fn encode(datagram: &Datagram) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(64);
    bytes.extend_from_slice(&MAGIC);
    bytes.push(VERSION);
    codec::encode_value_into(datagram, &mut bytes).expect("datagrams always encode");
    bytes
}

/// The padding of a [`heartbeat`]: enough for the longest info query the
/// master answers with (a challenge of 9 bytes and empty padding: 16 bytes).
pub const HEARTBEAT_PADDING: usize = 16;

/// A heartbeat, padded to at least the length of any query it triggers.
pub fn heartbeat() -> Vec<u8> {
    encode(&Datagram::Heartbeat {
        padding: vec![0; HEARTBEAT_PADDING],
    })
}

/// Decodes a datagram.
pub fn decode(bytes: &[u8]) -> Result<Datagram, DatagramError> {
    if bytes.len() < 5 || bytes[..4] != MAGIC {
        return Err(DatagramError::NotOurs);
    }
    if bytes[4] != VERSION {
        return Err(DatagramError::Version(bytes[4]));
    }
    codec::decode_value(&bytes[5..]).map_err(|e| DatagramError::Body(e.to_string()))
}

/// What a browser asks the master for (over TCP).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Filter {
    /// Exactly this game type.
    pub game_type: Option<String>,
    /// Exactly this scenario.
    pub scenario: Option<String>,
    /// At least this many players.
    pub min_players: Option<u16>,
    /// At most this many players.
    pub max_players: Option<u16>,
    /// Only servers with a free slot.
    pub not_full: bool,
    /// Only servers without a password.
    pub no_password: bool,
    /// Only dedicated servers.
    pub dedicated: Option<bool>,
    /// Exactly this version.
    pub version: Option<String>,
    /// Exactly this region.
    pub region: Option<String>,
    /// At most this many bots.
    pub max_bots: Option<u16>,
    /// Every one of these tags, key = value.
    pub tags: Vec<(String, String)>,
}

impl Filter {
    /// Checks what a list request may ask: at most [`MAX_TAGS`] tags, each
    /// text at most [`MAX_TEXT`] bytes (a server can hold no longer one,
    /// so such a filter could match nothing anyway). A filter past them is
    /// refused before any server is looked at, so that matching costs at
    /// most `MAX_TAGS × MAX_TAGS` comparisons of short texts per server.
    pub fn check(&self) -> Result<(), ListingError> {
        if self.tags.len() > MAX_TAGS {
            return Err(ListingError::FilterTooManyTags(self.tags.len()));
        }
        let texts = [&self.game_type, &self.scenario, &self.version, &self.region];
        let tag_texts = self.tags.iter().flat_map(|(k, v)| [Some(k), Some(v)]);
        for text in texts.into_iter().map(Option::as_ref).chain(tag_texts) {
            if let Some(text) = text.filter(|t| t.len() > MAX_TEXT) {
                return Err(ListingError::FilterTextTooLong(text.len()));
            }
        }
        Ok(())
    }

    /// Whether `info` passes.
    pub fn matches(&self, info: &ServerInfo) -> bool {
        let eq = |want: &Option<String>, have: &String| want.as_ref().is_none_or(|w| w == have);
        eq(&self.game_type, &info.game_type)
            && eq(&self.scenario, &info.scenario)
            && eq(&self.version, &info.version)
            && eq(&self.region, &info.region)
            && self.min_players.is_none_or(|m| info.players >= m)
            && self.max_players.is_none_or(|m| info.players <= m)
            && (!self.not_full || info.players < info.max_players)
            && (!self.no_password || !info.password)
            && self.dedicated.is_none_or(|d| info.dedicated == d)
            && self.max_bots.is_none_or(|m| info.bots <= m)
            && self.tags.iter().all(|tag| info.tags.contains(tag))
    }
}

/// A page request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRequest {
    /// Which servers.
    pub filter: Filter,
    /// Which page, from 0.
    pub page: u32,
    /// Servers per page (at most [`MAX_PAGE`]).
    pub page_size: u16,
}

/// The most servers in one page.
pub const MAX_PAGE: u16 = 100;

/// A page of servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListPage {
    /// The servers on this page, ordered by address.
    pub servers: Vec<Listed>,
    /// This page's number.
    pub page: u32,
    /// Matching servers in all.
    pub total: u32,
}

switchboard::channels! {
    /// The master's channel on its TCP side.
    pub enum MasterChannel {
        /// Lists and stats.
        Master = 16,
    }
}

switchboard::actions! {
    /// What travels on it.
    pub enum MasterAction {
        /// Browser → master: [`ListRequest`].
        List = 1,
        /// Master → browser: [`ListPage`].
        Page = 2,
        /// Browser → master: the counters (content `()`).
        Stats = 3,
        /// Master → browser: [`MasterStats`](crate::MasterStats).
        StatsReply = 4,
        /// Host → master: [`ProbeRequest`]: can the internet reach me?
        Probe = 5,
        /// Master → host: [`ProbeResult`].
        ProbeReply = 6,
    }
}

/// A host asks the master to connect back to it: to the address the
/// request came from (never another), on `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeRequest {
    /// The port the host's game listens on, as the internet sees it.
    pub port: u16,
}

/// What the master found when it connected back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// The address the master tried: the host's address as the master
    /// sees it, and the port asked.
    pub addr: SocketAddr,
    /// A Switchboard server answered there with its hello.
    pub reachable: bool,
    /// What happened, for people.
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_round_trip_and_garbage_is_refused() {
        let info = ServerInfo {
            name: "a".into(),
            max_players: 8,
            players: 2,
            ..ServerInfo::default()
        };
        for d in [
            Datagram::Heartbeat {
                padding: vec![0; HEARTBEAT_PADDING],
            },
            Datagram::InfoQuery {
                challenge: 7,
                padding: vec![0; 100],
            },
            Datagram::InfoReply { challenge: 7, info },
            Datagram::Ping { nonce: 1 },
            Datagram::Pong { nonce: 1 },
        ] {
            let bytes = encode(&d);
            assert!(bytes.len() <= MAX_DATAGRAM);
            assert_eq!(decode(&bytes).unwrap(), d);
        }
        assert_eq!(decode(b"GET / HTTP/1.1"), Err(DatagramError::NotOurs));
        assert_eq!(decode(b"SWMS\x09\x00"), Err(DatagramError::Version(9)));
        assert!(matches!(
            decode(b"SWMS\x02\xff\xff"),
            Err(DatagramError::Body(_))
        ));
    }

    #[test]
    fn filters_select_by_every_field() {
        let info = ServerInfo {
            name: "x".into(),
            game_type: "strategy".into(),
            scenario: "valley".into(),
            players: 3,
            max_players: 4,
            bots: 1,
            password: false,
            dedicated: true,
            version: "1.0".into(),
            region: "eu".into(),
            tags: vec![("mode".into(), "coop".into())],
        };
        assert!(Filter::default().matches(&info));
        let yes = Filter {
            game_type: Some("strategy".into()),
            min_players: Some(3),
            not_full: true,
            no_password: true,
            dedicated: Some(true),
            max_bots: Some(1),
            tags: vec![("mode".into(), "coop".into())],
            ..Filter::default()
        };
        assert!(yes.matches(&info));
        for no in [
            Filter {
                scenario: Some("islands".into()),
                ..Filter::default()
            },
            Filter {
                min_players: Some(4),
                ..Filter::default()
            },
            Filter {
                max_players: Some(2),
                ..Filter::default()
            },
            Filter {
                dedicated: Some(false),
                ..Filter::default()
            },
            Filter {
                region: Some("us".into()),
                ..Filter::default()
            },
            Filter {
                max_bots: Some(0),
                ..Filter::default()
            },
            Filter {
                tags: vec![("mode".into(), "pvp".into())],
                ..Filter::default()
            },
        ] {
            assert!(!no.matches(&info), "{no:?}");
        }
        let full = ServerInfo {
            players: 4,
            ..info.clone()
        };
        assert!(!Filter {
            not_full: true,
            ..Filter::default()
        }
        .matches(&full));
    }

    #[test]
    fn info_limits() {
        let check = |info: ServerInfo| info.check();
        assert_eq!(
            check(ServerInfo {
                name: "n".repeat(65),
                ..ServerInfo::default()
            }),
            Err(ListingError::TextTooLong(65))
        );
        assert_eq!(
            check(ServerInfo {
                name: "a\nb".into(),
                ..ServerInfo::default()
            }),
            Err(ListingError::ControlCharacters)
        );
        assert_eq!(
            check(ServerInfo {
                players: 3,
                max_players: 2,
                ..ServerInfo::default()
            }),
            Err(ListingError::PlayerCounts)
        );
        let many = (0..17).map(|i| (i.to_string(), String::new())).collect();
        assert_eq!(
            check(ServerInfo {
                tags: many,
                ..ServerInfo::default()
            }),
            Err(ListingError::TooManyTags(17))
        );
    }
}
