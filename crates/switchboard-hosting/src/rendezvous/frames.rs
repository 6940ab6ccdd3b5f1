//! The join-code relay's own frames (`docs/PROTOCOL.md` section 12).
//!
//! A host behind a router that will not forward its port dials out to a
//! public relay and gets a short join code; players join with the code,
//! and the relay pipes each player's frames to the host over a connection
//! the host opened, frame by frame, never reading the game's messages.
//!
//! Each frame here is a frame of section 1 (flags 0, raw payload) whose
//! payload starts with a four-byte tag. A player sends one of them, first,
//! before its hello; a host's control connection carries only these.

/// Player → relay, the first frame: `SWJN` then the code (ASCII).
pub const JOIN: [u8; 4] = *b"SWJN";
/// Host → relay, the first frame of the control connection: `SWHO`,
/// version (u16 BE), then either nothing (a new code) or the code to keep
/// (u8 length, ASCII) and its secret (16 bytes), after a reconnect.
pub const HOST: [u8; 4] = *b"SWHO";
/// Relay → host: `SWCD`, the secret (16 bytes), then the code (ASCII).
pub const CODE: [u8; 4] = *b"SWCD";
/// Relay → host: `SWNO` then why (UTF-8); the relay then hangs up.
pub const REFUSE: [u8; 4] = *b"SWNO";
/// Relay → host: `SWIN`, a ticket (u64 BE), the transport (u8: 0 TCP,
/// 1 WebSocket), then the player's address (UTF-8, `ip:port`).
pub const INCOMING: [u8; 4] = *b"SWIN";
/// Host → relay, the first frame of a new connection: `SWDA`, the secret
/// (16 bytes), the ticket (u64 BE). The connection then carries that
/// player's frames, both ways, unchanged.
pub const DATA: [u8; 4] = *b"SWDA";
/// Either way on the control connection: `SWPI`, a keep-alive.
pub const PING: [u8; 4] = *b"SWPI";

/// The version of these frames a host speaks.
pub const VERSION: u16 = 1;
/// The length of a host's secret.
pub const SECRET_LEN: usize = 16;
/// The largest frame of this module a peer may send (its length field).
pub const MAX_FRAME_LEN: usize = 256;

/// A host's secret: proves a data connection, or a reconnect, is its own.
pub type Secret = [u8; SECRET_LEN];

/// One of the relay's frames.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Frame {
    /// A player asks for the game of `code`.
    Join {
        /// The join code, as the player typed it.
        code: String,
    },
    /// A host registers; `keep` is the code and secret it had before a
    /// lost connection.
    Host {
        /// The version the host speaks.
        version: u16,
        /// The code to keep, with its secret.
        keep: Option<(String, Secret)>,
    },
    /// The host's code, and the secret of its data connections.
    Code {
        /// What players type.
        code: String,
        /// What the host's data connections show.
        secret: Secret,
    },
    /// The relay will not serve this host, and why.
    Refuse {
        /// Why, for people.
        reason: String,
    },
    /// A player is waiting: open a data connection for `ticket`.
    Incoming {
        /// Which player.
        ticket: u64,
        /// It came over WebSocket (else TCP).
        websocket: bool,
        /// Its address, as the relay sees it.
        addr: String,
    },
    /// This connection carries the player of `ticket`.
    Data {
        /// The host's secret.
        secret: Secret,
        /// The player's ticket.
        ticket: u64,
    },
    /// A keep-alive.
    Ping,
}

/// A frame that is not one of the relay's, or is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a join-code relay frame: {0}")]
pub struct BadFrame(pub &'static str);

impl Frame {
    /// The whole frame: length, flags (0) and payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut payload = Vec::with_capacity(32);
        match self {
            Frame::Join { code } => {
                payload.extend(JOIN);
                payload.extend(code.as_bytes());
            }
            Frame::Host { version, keep } => {
                payload.extend(HOST);
                payload.extend(version.to_be_bytes());
                if let Some((code, secret)) = keep {
                    payload.push(code.len() as u8);
                    payload.extend(code.as_bytes());
                    payload.extend(secret);
                }
            }
            Frame::Code { code, secret } => {
                payload.extend(CODE);
                payload.extend(secret);
                payload.extend(code.as_bytes());
            }
            Frame::Refuse { reason } => {
                payload.extend(REFUSE);
                let mut end = reason.len().min(MAX_FRAME_LEN - 8);
                while !reason.is_char_boundary(end) {
                    end -= 1;
                }
                payload.extend(&reason.as_bytes()[..end]);
            }
            Frame::Incoming {
                ticket,
                websocket,
                addr,
            } => {
                payload.extend(INCOMING);
                payload.extend(ticket.to_be_bytes());
                payload.push(u8::from(*websocket));
                payload.extend(addr.as_bytes());
            }
            Frame::Data { secret, ticket } => {
                payload.extend(DATA);
                payload.extend(secret);
                payload.extend(ticket.to_be_bytes());
            }
            Frame::Ping => payload.extend(PING),
        }
        let mut frame = Vec::with_capacity(5 + payload.len());
        frame.extend(((payload.len() + 1) as u32).to_be_bytes());
        frame.push(0);
        frame.extend(payload);
        frame
    }

    /// Reads a frame's payload (after the length and the flag byte).
    pub fn parse(payload: &[u8]) -> Result<Frame, BadFrame> {
        if payload.len() > MAX_FRAME_LEN {
            return Err(BadFrame("too long"));
        }
        let (tag, rest) = payload.split_at_checked(4).ok_or(BadFrame("too short"))?;
        let text = |bytes: &[u8]| {
            std::str::from_utf8(bytes)
                .map(str::to_string)
                .map_err(|_| BadFrame("text is not UTF-8"))
        };
        let secret = |bytes: &[u8]| -> Result<Secret, BadFrame> {
            bytes
                .try_into()
                .map_err(|_| BadFrame("a secret is 16 bytes"))
        };
        let ticket = |bytes: &[u8]| -> Result<u64, BadFrame> {
            Ok(u64::from_be_bytes(
                bytes
                    .try_into()
                    .map_err(|_| BadFrame("a ticket is 8 bytes"))?,
            ))
        };
        match <[u8; 4]>::try_from(tag).expect("four bytes") {
            JOIN => Ok(Frame::Join { code: text(rest)? }),
            HOST => {
                let (version, rest) = rest.split_at_checked(2).ok_or(BadFrame("no version"))?;
                let version = u16::from_be_bytes([version[0], version[1]]);
                let keep = match rest.split_first() {
                    None => None,
                    Some((&len, rest)) => {
                        let len = usize::from(len);
                        if rest.len() != len + SECRET_LEN {
                            return Err(BadFrame("a code to keep is its length, it and a secret"));
                        }
                        Some((text(&rest[..len])?, secret(&rest[len..])?))
                    }
                };
                Ok(Frame::Host { version, keep })
            }
            CODE => {
                let (key, code) = rest
                    .split_at_checked(SECRET_LEN)
                    .ok_or(BadFrame("no secret"))?;
                Ok(Frame::Code {
                    code: text(code)?,
                    secret: secret(key)?,
                })
            }
            REFUSE => Ok(Frame::Refuse {
                reason: String::from_utf8_lossy(rest).into_owned(),
            }),
            INCOMING => {
                if rest.len() < 9 {
                    return Err(BadFrame(
                        "an incoming player is a ticket, a transport, an address",
                    ));
                }
                Ok(Frame::Incoming {
                    ticket: ticket(&rest[..8])?,
                    websocket: rest[8] == 1,
                    addr: text(&rest[9..])?,
                })
            }
            DATA => {
                if rest.len() != SECRET_LEN + 8 {
                    return Err(BadFrame("a data connection is a secret and a ticket"));
                }
                Ok(Frame::Data {
                    secret: secret(&rest[..SECRET_LEN])?,
                    ticket: ticket(&rest[SECRET_LEN..])?,
                })
            }
            PING if rest.is_empty() => Ok(Frame::Ping),
            _ => Err(BadFrame("unknown tag")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frame: Frame) {
        let bytes = frame.encode();
        let length = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
        assert_eq!(length, bytes.len() - 4);
        assert_eq!(bytes[4], 0);
        assert_eq!(Frame::parse(&bytes[5..]), Ok(frame));
    }

    #[test]
    fn every_frame_reads_back_as_written() {
        let secret = [7u8; SECRET_LEN];
        round_trip(Frame::Join {
            code: "K7PQ2M".into(),
        });
        round_trip(Frame::Host {
            version: 1,
            keep: None,
        });
        round_trip(Frame::Host {
            version: 1,
            keep: Some(("K7PQ2M".into(), secret)),
        });
        round_trip(Frame::Code {
            code: "K7PQ2M".into(),
            secret,
        });
        round_trip(Frame::Refuse {
            reason: "no".into(),
        });
        round_trip(Frame::Incoming {
            ticket: 9,
            websocket: true,
            addr: "203.0.113.5:50000".into(),
        });
        round_trip(Frame::Data { secret, ticket: 9 });
        round_trip(Frame::Ping);
    }

    #[test]
    fn a_join_frame_is_the_bytes_protocol_md_shows() {
        let bytes = Frame::Join {
            code: "K7PQ2M".into(),
        }
        .encode();
        assert_eq!(bytes, b"\x00\x00\x00\x0b\x00SWJNK7PQ2M");
    }

    #[test]
    fn malformed_frames_are_errors_not_panics() {
        for payload in [
            &b""[..],
            b"SWJ",
            b"SWHO\x00",
            b"SWHO\x00\x01\x05AB",
            b"SWCDshort",
            b"SWIN\x00\x00",
            b"SWDA\x01",
            b"SWPIx",
            b"XXXX",
            b"SWJN\xff\xfe",
        ] {
            assert!(Frame::parse(payload).is_err(), "{payload:?}");
        }
        assert!(Frame::parse(&[b'S'; 300]).is_err());
    }
}
