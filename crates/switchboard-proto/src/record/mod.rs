//! Recordings of a server's session: every input of its
//! [`ManagerCore`](crate::manager::core::ManagerCore) with its time, every
//! random byte it drew, and a summary of every output, so that
//! [`replay`] gives the same outputs from the same inputs, or says where
//! it does not. The format is in `docs/RECORDING.md`.
//!
//! A file is a zlib stream (flate2) of length-prefixed records: a
//! [`Header`] first, then [`Record`]s. The driver writes it (off its hot
//! path); [`RecordReader`] reads it back, and a cut or corrupted file is a
//! [`RecordError`], never a panic.

pub mod clock;
mod replay;

use std::io::{Read, Write};
use std::net::SocketAddr;

use flate2::read::ZlibDecoder;
use serde::{Deserialize, Serialize};

use crate::codec;
use crate::manager::core::{ManagerAction, ManagerEvent, Snapshot};
use crate::manager::ShareError;
use crate::message::{Message, PeerId};
use crate::reason::{DisconnectReason, SocketError};
use crate::session::{ClientId, ReconnectToken, SharedSession};

mod header;
pub use header::Header;
pub use replay::{replay, Divergence, ReplayError, ReplayReport, Replayer, Step};

/// The first four bytes of the decompressed stream.
pub const MAGIC: [u8; 4] = *b"SWRC";

/// The format this build writes. It reads this one, format 2 (whose header
/// had no `remembered_verdicts`) and format 1 (which had no
/// [`Record::Snapshot`]: its recordings all start with the server).
pub const FORMAT: u16 = 3;

/// The largest record a reader takes (a message's frame is at most 16 MiB).
pub const MAX_RECORD: usize = 32 * 1024 * 1024;

/// One input of the core, as recorded: what [`ManagerEvent`] carries, plus
/// the clock's work and the operator's kicks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Input {
    /// A connection completed its handshake.
    Connected {
        /// Its id.
        peer: u64,
        /// Its address.
        addr: SocketAddr,
    },
    /// A message arrived.
    Received {
        /// From whom.
        peer: u64,
        /// Its channel.
        channel: u16,
        /// Its action.
        action: u16,
        /// Its content.
        content: Vec<u8>,
    },
    /// A connection ended.
    Disconnected {
        /// Which.
        peer: u64,
        /// Why.
        reason: DisconnectReason,
    },
    /// The socket layer reported a problem (logged only; its text).
    Failed {
        /// Which.
        peer: u64,
        /// What, as the log said it.
        error: String,
    },
    /// The shared store answered a claim.
    Claimed {
        /// The connection that asked.
        peer: u64,
        /// The session it asked for.
        client: ClientId,
        /// The token the claim gave it.
        new_token: ReconnectToken,
        /// The store's answer.
        result: Result<Option<SharedSession>, ShareError>,
    },
    /// The shared store says other processes took these sessions.
    MovedAway {
        /// Whose.
        clients: Vec<ClientId>,
    },
    /// The shared store came back and may have lost what was written.
    StoreRestored,
    /// The clock's work; `rtts` are the round trips the core asked for, in
    /// microseconds, by peer.
    Tick {
        /// (peer, round trip in µs), in the order asked.
        rtts: Vec<(u64, u64)>,
    },
    /// The operator kicked a client.
    Kick {
        /// Whom.
        client: ClientId,
        /// Why.
        reason: String,
    },
}

impl Input {
    /// The input a network event is.
    pub fn of(event: &ManagerEvent) -> Self {
        match event {
            ManagerEvent::Connected { peer, addr } => Input::Connected {
                peer: peer.0,
                addr: *addr,
            },
            ManagerEvent::Received { peer, message } => Input::Received {
                peer: peer.0,
                channel: message.channel_id(),
                action: message.action_id(),
                content: message.content_bytes().to_vec(),
            },
            ManagerEvent::Disconnected { peer, reason } => Input::Disconnected {
                peer: peer.0,
                reason: reason.clone(),
            },
            ManagerEvent::Failed { peer, error } => Input::Failed {
                peer: peer.0,
                error: error.to_string(),
            },
            ManagerEvent::Claimed {
                peer,
                client,
                new_token,
                result,
            } => Input::Claimed {
                peer: peer.0,
                client: *client,
                new_token: new_token.clone(),
                result: result.clone(),
            },
            ManagerEvent::MovedAway { clients } => Input::MovedAway {
                clients: clients.clone(),
            },
            ManagerEvent::StoreRestored => Input::StoreRestored,
        }
    }

    /// The network event this input was, for a replay (`None` for the
    /// clock's work and kicks, which are not events).
    pub fn to_event(&self) -> Option<ManagerEvent> {
        Some(match self {
            Input::Connected { peer, addr } => ManagerEvent::Connected {
                peer: PeerId(*peer),
                addr: *addr,
            },
            Input::Received {
                peer,
                channel,
                action,
                content,
            } => ManagerEvent::Received {
                peer: PeerId(*peer),
                message: Message::from_raw(*channel, *action, content.clone().into()),
            },
            Input::Disconnected { peer, reason } => ManagerEvent::Disconnected {
                peer: PeerId(*peer),
                reason: reason.clone(),
            },
            Input::Failed { peer, error } => ManagerEvent::Failed {
                peer: PeerId(*peer),
                error: SocketError::Transport(error.clone()),
            },
            Input::Claimed {
                peer,
                client,
                new_token,
                result,
            } => ManagerEvent::Claimed {
                peer: PeerId(*peer),
                client: *client,
                new_token: new_token.clone(),
                result: result.clone(),
            },
            Input::MovedAway { clients } => ManagerEvent::MovedAway {
                clients: clients.clone(),
            },
            Input::StoreRestored => ManagerEvent::StoreRestored,
            Input::Tick { .. } | Input::Kick { .. } => return None,
        })
    }
}

/// One output of the core, summarized: enough to see what differs, small
/// enough to keep for every output. Log lines are not outputs here (they
/// are the operator's, not the players').
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Output {
    /// A message to these peers.
    Send {
        /// To whom.
        peers: Vec<u64>,
        /// Its channel.
        channel: u16,
        /// Its action.
        action: u16,
        /// Its content's length.
        len: u32,
        /// Its content's hash (FNV-1a, 64 bits).
        hash: u64,
    },
    /// A connection closed.
    Close {
        /// Which.
        peer: u64,
        /// Its close code.
        code: u16,
        /// Its reason.
        reason: String,
    },
    /// A claim asked of the shared store, a write to it, or a checkpoint:
    /// what it was, hashed.
    Store {
        /// Which kind (`claim`, `share`, `checkpoint`).
        kind: String,
        /// A hash of what it carried.
        hash: u64,
    },
}

impl Output {
    /// The outputs of one batch of actions, in order.
    pub fn of(actions: &[ManagerAction]) -> Vec<Output> {
        actions
            .iter()
            .filter_map(|action| match action {
                ManagerAction::Send { peer, message } => Some(Self::send(vec![peer.0], message)),
                ManagerAction::SendToMany { peers, message } => {
                    Some(Self::send(peers.iter().map(|p| p.0).collect(), message))
                }
                ManagerAction::Close { peer, code, reason } => Some(Output::Close {
                    peer: peer.0,
                    code: code.0,
                    reason: reason.clone(),
                }),
                ManagerAction::Log(_) => None,
                ManagerAction::Claim { .. } => Some(Self::store("claim", action)),
                ManagerAction::Share(_) => Some(Self::store("share", action)),
                ManagerAction::Checkpoint(state) => Some(Output::Store {
                    kind: "checkpoint".into(),
                    hash: fnv1a(state),
                }),
            })
            .collect()
    }

    fn send(peers: Vec<u64>, message: &Message) -> Output {
        Output::Send {
            peers,
            channel: message.channel_id(),
            action: message.action_id(),
            len: message.content_bytes().len() as u32,
            hash: fnv1a(message.content_bytes()),
        }
    }

    fn store(kind: &str, action: &ManagerAction) -> Output {
        Output::Store {
            kind: kind.into(),
            hash: fnv1a(format!("{action:?}").as_bytes()),
        }
    }
}

/// One record after the header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    /// An input, `after_nanos` after the one before (after the start, for
    /// the first).
    Input {
        /// Nanoseconds since the previous input (exact: the replay's clock
        /// compares as the recorded one did).
        after_nanos: u64,
        /// What went in.
        input: Input,
    },
    /// Random bytes the core drew while taking in the input before.
    Drawn(Vec<u8>),
    /// What the input before gave out.
    Outputs(Vec<Output>),
    /// The recording stopped early (its queue was full): why. The last
    /// record.
    Stopped(String),
    /// The recording ended with the server. The last record: a file
    /// without it (or `Stopped`) was cut short.
    End,
    /// The core and its game when the recording began, for a recording
    /// started while the server ran: the first record after the header.
    Snapshot(Snapshot),
}

/// Writes one length-prefixed record (or the header) to `out`.
pub fn write_record<T: Serialize>(out: &mut impl Write, record: &T) -> std::io::Result<()> {
    let bytes = codec::encode_value(record).map_err(std::io::Error::other)?;
    out.write_all(&(bytes.len() as u32).to_le_bytes())?;
    out.write_all(&bytes)
}

/// Why a recording could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Reading failed (the file, or its compressed stream: a cut file ends
    /// here).
    #[error("cannot read the recording: {0}")]
    Io(#[from] std::io::Error),
    /// It is not a Switchboard recording, or of another format.
    #[error("not a Switchboard recording of format {FORMAT}: {0}")]
    NotARecording(String),
    /// A record announces more than [`MAX_RECORD`] bytes.
    #[error("record {record} announces {len} bytes, more than any record has")]
    TooLarge {
        /// Its number (the header is 0).
        record: u64,
        /// What it announced.
        len: usize,
    },
    /// The file ends before its last record: the server (or its disk)
    /// stopped before the recording was complete.
    #[error("the recording is cut short after record {records}")]
    CutShort {
        /// Records read before the cut.
        records: u64,
    },
    /// A record's bytes are not a record.
    #[error("record {record} does not decode: {reason}")]
    Corrupt {
        /// Its number (the header is 0).
        record: u64,
        /// Why.
        reason: String,
    },
}

/// Reads a recording: its header, then its records in order.
pub struct RecordReader<R: Read> {
    stream: ZlibDecoder<R>,
    header: Header,
    read: u64,
    ended: bool,
}

impl<R: Read> std::fmt::Debug for RecordReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordReader")
            .field("header", &self.header)
            .field("read", &self.read)
            .finish()
    }
}

impl<R: Read> RecordReader<R> {
    /// Opens a recording: reads and checks its header.
    pub fn new(file: R) -> Result<Self, RecordError> {
        let mut stream = ZlibDecoder::new(file);
        let Some(bytes) = read_bytes(&mut stream, 0)? else {
            return Err(RecordError::NotARecording("it is empty".into()));
        };
        let mut header = header::decode(&bytes)?;
        header.rules.remembered_verdicts =
            usize::try_from(header.remembered_verdicts).unwrap_or(usize::MAX);
        if header.magic != MAGIC || !(1..=FORMAT).contains(&header.format) {
            return Err(RecordError::NotARecording(format!(
                "magic {:?}, format {}",
                header.magic, header.format
            )));
        }
        Ok(Self {
            stream,
            header,
            read: 0,
            ended: false,
        })
    }

    /// Its header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The next record, `None` after the last (`End` or `Stopped`); a file
    /// that ends before it is [`RecordError::CutShort`].
    pub fn next_record(&mut self) -> Result<Option<Record>, RecordError> {
        if self.ended {
            return Ok(None);
        }
        self.read += 1;
        match read_value(&mut self.stream, self.read)? {
            Some(record) => {
                self.ended = matches!(record, Record::End | Record::Stopped(_));
                if self.ended {
                    // Nothing after the last record, and the stream's own
                    // checksum at its end holds.
                    let mut rest = Vec::new();
                    self.stream.read_to_end(&mut rest)?;
                    if !rest.is_empty() {
                        return Err(RecordError::Corrupt {
                            record: self.read + 1,
                            reason: format!("{} bytes after the last record", rest.len()),
                        });
                    }
                }
                Ok(Some(record))
            }
            None => Err(RecordError::CutShort {
                records: self.read - 1,
            }),
        }
    }

    /// How many records were read so far.
    pub fn records_read(&self) -> u64 {
        self.read
    }
}

/// One length-prefixed value (as [`write_record`] writes it) from a
/// decompressed stream, `None` at a clean end: the framing of every
/// Switchboard recording (the relay's has records of its own).
pub fn read_value<T: serde::de::DeserializeOwned>(
    stream: &mut impl Read,
    record: u64,
) -> Result<Option<T>, RecordError> {
    match read_bytes(stream, record)? {
        Some(bytes) => decode_record(&bytes, record).map(Some),
        None => Ok(None),
    }
}

/// Record number `record`'s bytes (`None` at the end of the stream).
fn read_bytes(stream: &mut impl Read, record: u64) -> Result<Option<Vec<u8>>, RecordError> {
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len[..1]) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err.into()),
    }
    stream.read_exact(&mut len[1..])?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_RECORD {
        return Err(RecordError::TooLarge { record, len });
    }
    let mut bytes = Vec::new();
    stream.take(len as u64).read_to_end(&mut bytes)?;
    if bytes.len() < len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("record {record} is cut short"),
        )
        .into());
    }
    Ok(Some(bytes))
}

/// Record number `record`, decoded from its bytes.
pub(super) fn decode_record<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    record: u64,
) -> Result<T, RecordError> {
    codec::decode_value(bytes).map_err(|err| RecordError::Corrupt {
        record,
        reason: err.to_string(),
    })
}

/// FNV-1a, 64 bits: a stable hash of output bytes (the same in every build).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
