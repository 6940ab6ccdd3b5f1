//! Torque's master-server packets, byte for byte (`docs/TORQUE.md`, from
//! the engine's `serverQuery.cpp`): what the master reads (heartbeat 22,
//! master info response 12, list requests 6 and 44, game types request 2)
//! and what it writes (master info request 10, list pages 8 and 40, game
//! types response 4). Little-endian integers, byte-aligned, a 6-byte header:
//! `type, flags, key u16, session u16`.

use std::net::SocketAddr;

/// Packet types the master deals in.
pub mod kind {
    /// Client → master: the game types and mission types listed.
    pub const GAME_TYPES_REQUEST: u8 = 2;
    /// Master → client: the game types and mission types.
    pub const GAME_TYPES_RESPONSE: u8 = 4;
    /// Client → master: a list request (initial, index 255) or the
    /// re-request of one page.
    pub const LIST_REQUEST: u8 = 6;
    /// Master → client: one page of addresses (IPv4).
    pub const LIST_RESPONSE: u8 = 8;
    /// Master → game server: your info, under this key.
    pub const MASTER_INFO_REQUEST: u8 = 10;
    /// Game server → master: its info.
    pub const MASTER_INFO_RESPONSE: u8 = 12;
    /// Game server → master: I am here.
    pub const HEARTBEAT: u8 = 22;
    /// Master → Torque3D client: one page of addresses (IPv4 and IPv6).
    pub const EXTENDED_LIST_RESPONSE: u8 = 40;
    /// Torque3D client → master: the re-request of one page (type 40).
    pub const EXTENDED_LIST_REREQUEST: u8 = 44;
}

/// Query flags of a list request.
pub mod query_flags {
    /// Torque3D: answer with type 40 pages.
    pub const NEW_STYLE_RESPONSE: u8 = 4;
}

/// Server flags of an info response (12) and filter flags of a list
/// request (6).
pub mod server_flags {
    /// A dedicated server (12), or only those (6).
    pub const DEDICATED: u8 = 1;
    /// A password is needed (12); only servers without one (6).
    pub const PASSWORDED: u8 = 2;
    /// Runs on Linux (12), or only those (6).
    pub const LINUX: u8 = 4;
    /// Torque3D: an Xbox server (12); not those (6).
    pub const XENON: u8 = 64;
    /// Only the client's own version (6).
    pub const CURRENT_VERSION: u8 = 128;
}

/// The initial list request's page index.
pub const INITIAL_REQUEST: u8 = 255;
/// The longest datagram the master writes: under a typical path MTU.
pub const MAX_REPLY: usize = 1400;
/// The header's length.
pub const HEADER_LEN: usize = 6;

/// Why a packet was dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TorqueError {
    /// It ended before a field did.
    #[error("truncated packet")]
    Truncated,
    /// A type the master does not take.
    #[error("unknown packet type {0}")]
    Unknown(u8),
}

/// The 6-byte header every packet starts with. A reply echoes `flags` and
/// `key`/`session` unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The packet type.
    pub kind: u8,
    /// Query flags.
    pub flags: u8,
    /// The key (bytes 2-3).
    pub key: u16,
    /// The session (bytes 4-5).
    pub session: u16,
}

impl Header {
    /// `K = (session << 16) | key`, as the engine compares it.
    pub fn k(&self) -> u32 {
        (u32::from(self.session) << 16) | u32::from(self.key)
    }

    fn write(&self, kind: u8, out: &mut Vec<u8>) {
        out.push(kind);
        out.push(self.flags);
        out.extend_from_slice(&self.key.to_le_bytes());
        out.extend_from_slice(&self.session.to_le_bytes());
    }
}

/// A game server's info, as its master info response (12) has it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TorqueInfo {
    /// Its game type.
    pub game_type: String,
    /// Its mission type.
    pub mission_type: String,
    /// Players at most.
    pub max_players: u8,
    /// Its region mask.
    pub region_mask: u32,
    /// Its version.
    pub version: u32,
    /// [`server_flags`]: dedicated, passworded, Linux, Xenon.
    pub flags: u8,
    /// Bots playing.
    pub bots: u8,
    /// CPU speed, MHz (u32 here; u16 elsewhere in the engine).
    pub cpu_mhz: u32,
    /// Players playing.
    pub players: u8,
}

/// A list request's filters (the initial request's; a re-request carries
/// zeros).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TorqueFilter {
    /// A game type, or "" / "any" (any case) for all.
    pub game_type: String,
    /// A mission type, or "" / "any".
    pub mission_type: String,
    /// Players at least.
    pub min_players: u8,
    /// Players at most (0: any).
    pub max_players: u8,
    /// Regions wanted (0: any).
    pub region_mask: u32,
    /// A version (0: any; used only with [`server_flags::CURRENT_VERSION`]).
    pub version: u32,
    /// [`server_flags`] as filters.
    pub flags: u8,
    /// Bots at most (0: any).
    pub max_bots: u8,
    /// CPU MHz at least.
    pub min_cpu: u16,
}

/// A packet the master takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    /// 22: a game server is here.
    Heartbeat(Header),
    /// 12: a game server's info (its GUIDs are not kept).
    InfoResponse(Header, TorqueInfo),
    /// 6 with index 255 (or 44's equivalent never happens): an initial
    /// request with its filters.
    ListRequest(Header, TorqueFilter),
    /// 6 or 44 with a page index: one page again.
    PageRequest(Header, u8),
    /// 2: the game types.
    GameTypesRequest(Header),
}

/// Reads bytes off the front of a packet.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TorqueError> {
        if self.0.len() < n {
            return Err(TorqueError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, TorqueError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, TorqueError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, TorqueError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A CString: a u8 length, then the bytes (not NUL-terminated), as
    /// text with anything that is not printable replaced.
    fn cstring(&mut self) -> Result<String, TorqueError> {
        let len = self.u8()? as usize;
        let bytes = self.take(len)?;
        Ok(String::from_utf8_lossy(bytes)
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect())
    }

    fn header(&mut self) -> Result<Header, TorqueError> {
        Ok(Header {
            kind: self.u8()?,
            flags: self.u8()?,
            key: self.u16()?,
            session: self.u16()?,
        })
    }
}

/// Reads a packet sent to the master. Bytes after a valid packet are
/// ignored (the engine writes some: quirk 4); a truncated packet or an
/// unknown type is an error.
pub fn parse(bytes: &[u8]) -> Result<Packet, TorqueError> {
    let mut r = Reader(bytes);
    let header = r.header()?;
    match header.kind {
        kind::HEARTBEAT => Ok(Packet::Heartbeat(header)),
        kind::GAME_TYPES_REQUEST => Ok(Packet::GameTypesRequest(header)),
        kind::MASTER_INFO_RESPONSE => {
            let info = TorqueInfo {
                game_type: r.cstring()?,
                mission_type: r.cstring()?,
                max_players: r.u8()?,
                region_mask: r.u32()?,
                version: r.u32()?,
                flags: r.u8()?,
                bots: r.u8()?,
                cpu_mhz: r.u32()?,
                players: r.u8()?,
            };
            // The player GUIDs follow, as many as the engine's doubled
            // counter wrote (quirk 1): not needed, not trusted.
            Ok(Packet::InfoResponse(header, info))
        }
        kind::LIST_REQUEST => {
            // A page index; a Torque3D re-request writes it as a u16, whose
            // first (low) byte is the same index (quirk 4).
            let index = r.u8()?;
            if index != INITIAL_REQUEST {
                return Ok(Packet::PageRequest(header, index));
            }
            let filter = TorqueFilter {
                game_type: r.cstring()?,
                mission_type: r.cstring()?,
                min_players: r.u8()?,
                max_players: r.u8()?,
                region_mask: r.u32()?,
                version: r.u32()?,
                flags: r.u8()?,
                max_bots: r.u8()?,
                min_cpu: r.u16()?,
            };
            // The buddy list follows; the master does not search buddies.
            Ok(Packet::ListRequest(header, filter))
        }
        kind::EXTENDED_LIST_REREQUEST => Ok(Packet::PageRequest(header, r.u8()?)),
        other => Err(TorqueError::Unknown(other)),
    }
}

/// The master info request (10) the master sends a game server that
/// heartbeat, under `k` (its key in the low half, its session in the high).
pub fn info_request(k: u32) -> Vec<u8> {
    let header = Header {
        kind: kind::MASTER_INFO_REQUEST,
        flags: 0,
        key: k as u16,
        session: (k >> 16) as u16,
    };
    let mut out = Vec::with_capacity(HEADER_LEN);
    header.write(kind::MASTER_INFO_REQUEST, &mut out);
    out
}

/// Bytes one address takes in a page of `new_style` (40) or old (8) form;
/// `None` for an address an old page cannot carry (IPv6).
fn entry_len(addr: &SocketAddr, new_style: bool) -> Option<usize> {
    match (addr, new_style) {
        (SocketAddr::V4(_), false) => Some(6),
        (SocketAddr::V6(_), false) => None,
        (SocketAddr::V4(_), true) => Some(7),
        (SocketAddr::V6(_), true) => Some(19),
    }
}

/// Cuts `servers` into pages that each fit in [`MAX_REPLY`] bytes, the
/// first in `first_len` (the first answer to a client not yet proven is
/// kept small; the client re-requests the other pages): the addresses of
/// each page. An old-style list (8) leaves IPv6 servers out; an empty list
/// is one empty page (quirk 5); at most 255 (old) or 65,535 (new) pages.
pub fn paginate(servers: &[SocketAddr], new_style: bool, first_len: usize) -> Vec<Vec<SocketAddr>> {
    let head = HEADER_LEN + if new_style { 6 } else { 4 };
    let max_pages = if new_style { u16::MAX as usize } else { 255 };
    let mut pages = vec![Vec::new()];
    let mut used = head;
    for addr in servers {
        let Some(len) = entry_len(addr, new_style) else {
            continue;
        };
        let room = if pages.len() == 1 {
            first_len.min(MAX_REPLY)
        } else {
            MAX_REPLY
        };
        if used + len > room {
            if pages.len() == max_pages {
                break;
            }
            pages.push(Vec::new());
            used = head;
        }
        pages.last_mut().expect("one page at least").push(*addr);
        used += len;
    }
    pages
}

/// Page `index` of `total` in the form the request asked for: type 8
/// (`u8 index, u8 total, u16 count`, then IPv4 bytes and a u16 port each)
/// or, for a Torque3D request (flag 4), type 40 (`u16 index, u16 total, u16
/// count`, then an address type, the address and a u16 port each). The
/// request's flags and K are echoed.
pub fn list_page(request: &Header, index: usize, total: usize, page: &[SocketAddr]) -> Vec<u8> {
    let new_style = request.flags & query_flags::NEW_STYLE_RESPONSE != 0;
    let mut out = Vec::with_capacity(MAX_REPLY);
    if new_style {
        request.write(kind::EXTENDED_LIST_RESPONSE, &mut out);
        out.extend_from_slice(&(index as u16).to_le_bytes());
        out.extend_from_slice(&(total as u16).to_le_bytes());
    } else {
        request.write(kind::LIST_RESPONSE, &mut out);
        out.push(index as u8);
        out.push(total as u8);
    }
    out.extend_from_slice(&(page.len() as u16).to_le_bytes());
    for addr in page {
        match addr {
            SocketAddr::V4(v4) => {
                if new_style {
                    out.push(0);
                }
                out.extend_from_slice(&v4.ip().octets());
            }
            SocketAddr::V6(v6) => {
                out.push(1);
                out.extend_from_slice(&v6.ip().octets());
            }
        }
        out.extend_from_slice(&addr.port().to_le_bytes());
    }
    out
}

/// The game types response (4): `u8 n` and n CStrings of game types, then
/// `u8 m` and m CStrings of mission types, as many as fit in `max_len`
/// bytes (at most [`MAX_REPLY`]; each text cut at 255 bytes).
pub fn game_types(
    request: &Header,
    game_types: &[String],
    mission_types: &[String],
    max_len: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAX_REPLY);
    request.write(kind::GAME_TYPES_RESPONSE, &mut out);
    // Half the room for each list.
    let budget = (max_len.clamp(HEADER_LEN + 2, MAX_REPLY) - HEADER_LEN) / 2;
    for list in [game_types, mission_types] {
        let count_at = out.len();
        out.push(0);
        let mut used = 1;
        let mut count = 0u8;
        for text in list {
            let bytes = &text.as_bytes()[..text.len().min(255)];
            if used + 1 + bytes.len() > budget || count == u8::MAX {
                break;
            }
            out.push(bytes.len() as u8);
            out.extend_from_slice(bytes);
            used += 1 + bytes.len();
            count += 1;
        }
        out[count_at] = count;
    }
    out
}
