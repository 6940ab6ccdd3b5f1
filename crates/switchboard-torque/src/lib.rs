//! Torque games on Switchboard's master (`docs/TORQUE.md`): unmodified TGE
//! 1.5.2, TGEA 1.7 and Torque3D servers heartbeat to the master's Torque
//! port and are listed, after answering an info request under a fresh key,
//! in the same registry as native servers (tagged `protocol=torque`);
//! Torque clients get them in the engine's list pages.
//!
//! [`TorquePort`] is the master's second listing port
//! (`switchboard_master::ListingPort`):
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use switchboard_master::MasterServer;
//! use switchboard_torque::{TorqueConfig, TorquePort, CUSTOMARY_PORT};
//!
//! let master = MasterServer::builder()
//!     .listing_port(CUSTOMARY_PORT, |master| {
//!         TorquePort::new(TorqueConfig::default(), master)
//!     })
//!     .spawn()?;
//! println!("Torque games: udp://{:?}", master.listing_port_addr());
//! # Ok(()) }
//! ```
//!
//! ```text
//!  game server ──22 heartbeat──▶ master ──10 info request (fresh K, to the observed address)──▶ game server
//!  game server ──12 info response (that K)──▶ master                       (listed from now on)
//!  client ──6 list request (index 255, filters)──▶ master ──8 (or 40) page 0 of N──▶ client
//!  client ──6 or 44 re-request of page i (new key, zeroed filters)──▶ master ──page i (from the cached query)──▶ client
//! ```
//!
//! Safety as the native side: replies go only to the address a packet came
//! from; heartbeats and list requests are rate-limited per IP; an info
//! request is no longer than the heartbeat that earned it; a list request
//! gets one page, never more; the registry, the unanswered requests and the
//! cached queries are bounded.
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | [`packet`] | the engine's master packets, read and written byte for byte |
//! | `port` | [`TorquePort`]: heartbeats, info requests under fresh keys, list pages and re-requests, game types |
//! | `state` | what the port holds: requests out, rate limits, bytes sent per destination, proven clients |
//! | `cache` | each list query's pages, kept for its re-requests, fair per client |
//! | `config` | [`TorqueConfig`] and [`TorqueStats`] |

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod cache;
mod config;
pub mod packet;
mod port;
mod state;

use packet::{server_flags, TorqueFilter, TorqueInfo};
use switchboard_master::protocol::MAX_TEXT;
use switchboard_master::ServerInfo;

pub use config::{TorqueConfig, TorqueStats};
pub use port::TorquePort;

/// The tag a Torque server is listed with (in the list API and the native
/// browser): `protocol` = `torque`.
pub const PROTOCOL_TAG: (&str, &str) = ("protocol", "torque");
/// The tag a native server sets to be listed to Torque clients too:
/// `torque` = `compatible`. Native servers without it never are.
pub const COMPATIBLE_TAG: (&str, &str) = ("torque", "compatible");
/// The engine's customary master port.
pub const CUSTOMARY_PORT: u16 = 28002;

/// A Torque server's info as the registry keeps it: game type, mission
/// type (as the scenario), players, bots, flags, the region mask and the
/// version as numbers in text, the CPU in a tag.
pub fn server_info(info: &TorqueInfo) -> ServerInfo {
    let players = u16::from(info.players);
    let max_players = u16::from(info.max_players).max(players);
    let mut tags = vec![(PROTOCOL_TAG.0.into(), PROTOCOL_TAG.1.into())];
    tags.push(("cpu_mhz".into(), info.cpu_mhz.to_string()));
    if info.flags & server_flags::LINUX != 0 {
        tags.push(("os".into(), "linux".into()));
    }
    if info.flags & server_flags::XENON != 0 {
        tags.push(("platform".into(), "xenon".into()));
    }
    let clip = |text: &str| {
        let mut end = text.len().min(MAX_TEXT);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].to_string()
    };
    ServerInfo {
        // The engine's master info has no name: a browser asks the server.
        name: String::new(),
        game_type: clip(&info.game_type),
        scenario: clip(&info.mission_type),
        players,
        max_players,
        bots: u16::from(info.bots).min(players),
        password: info.flags & server_flags::PASSWORDED != 0,
        dedicated: info.flags & server_flags::DEDICATED != 0,
        version: info.version.to_string(),
        region: info.region_mask.to_string(),
        tags,
    }
}

fn tag<'a>(info: &'a ServerInfo, key: &str) -> Option<&'a str> {
    info.tags
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Whether a server passes a Torque list request's filters, as the engine's
/// client would re-filter it: game and mission type ("any" or empty for
/// all, case-insensitive), players, bots, CPU, dedicated, not passworded,
/// Linux, not Xenon, the version, the region mask.
pub fn matches(filter: &TorqueFilter, info: &ServerInfo) -> bool {
    let kind = |want: &str, have: &str| {
        want.is_empty() || want.eq_ignore_ascii_case("any") || want.eq_ignore_ascii_case(have)
    };
    let number = |text: &str| text.parse::<u32>().unwrap_or(0);
    let flag = |bit: u8| filter.flags & bit != 0;
    let cpu = tag(info, "cpu_mhz").map_or(0, number);
    kind(&filter.game_type, &info.game_type)
        && kind(&filter.mission_type, &info.scenario)
        && info.players >= u16::from(filter.min_players)
        && (filter.max_players == 0 || info.players <= u16::from(filter.max_players))
        && (filter.max_bots == 0 || info.bots <= u16::from(filter.max_bots))
        && cpu >= u32::from(filter.min_cpu)
        && (!flag(server_flags::DEDICATED) || info.dedicated)
        && (!flag(server_flags::PASSWORDED) || !info.password)
        && (!flag(server_flags::LINUX) || tag(info, "os") == Some("linux"))
        && (!flag(server_flags::XENON) || tag(info, "platform") != Some("xenon"))
        && (!flag(server_flags::CURRENT_VERSION) || number(&info.version) == filter.version)
        && (filter.region_mask == 0 || number(&info.region) & filter.region_mask != 0)
}

#[cfg(test)]
mod tests;
