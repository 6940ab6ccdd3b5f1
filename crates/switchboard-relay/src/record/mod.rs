//! Recording a relay and replaying it exactly (`docs/RECORDING.md`, "The
//! relay").
//!
//! The relay's core ([`Relay`]) takes everything as arguments, its clock
//! included (the server's milliseconds), and its answers depend on nothing
//! else: a file of its inputs, each with a summary of what it answered,
//! replays on a fresh core to the same answers, or says at which input it
//! does not. The driver's own work (pacing, batches, sockets) is not the
//! core's and is not recorded.
//!
//! A file is a zlib stream of length-prefixed bincode values, as the
//! manager's recordings are: a [`RelayHeader`], then [`RelayRecord`]s,
//! `End` (or `Stopped`) last. It is written by the one recorder
//! (`switchboard::recorder::Recorder`, as the manager's): a thread of its
//! own behind a bounded queue, in batches of 256 calls (or a second's, when
//! calls are few); when the queue is full the recording stops, says why,
//! and the relay goes on.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use switchboard::record::fnv1a;
use switchboard::recorder::{Recorder, Recording};

#[cfg(doc)]
use crate::hub::Relay;
use crate::hub::{Link, Outgoing, RelayEvent, RelayLimits};
use crate::interest::InterestConfig;
use crate::transform::Transform;

mod replay;
mod watch;

pub use replay::{
    is_relay_recording, replay, RelayDivergence, RelayReplay, RelayReplayer, ReplayedCall,
};
pub use watch::{watch, watch_with};

/// The first four bytes of a relay recording's header.
pub const MAGIC: [u8; 4] = *b"SWRL";

/// The format this build writes. It reads this one and format 1 (which had
/// no [`RelayRecord::Snapshot`]: its recordings all start with the relay).
pub const FORMAT: u16 = 2;

/// What a relay recording starts with: what a fresh core needs to be the
/// one recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayHeader {
    /// [`MAGIC`].
    pub magic: [u8; 4],
    /// [`FORMAT`].
    pub format: u16,
    /// The Switchboard version that wrote it.
    pub version: String,
    /// The relay's limits.
    pub limits: RelayLimits,
    /// Interest by distance, when on.
    pub interest: Option<InterestConfig>,
    /// The id prefix of a relay of several.
    pub id_prefix: Option<u32>,
}

impl RelayHeader {
    /// The header of a relay run with `config`.
    pub fn of(config: &crate::RelayConfig) -> Self {
        Self {
            magic: MAGIC,
            format: FORMAT,
            version: env!("CARGO_PKG_VERSION").to_string(),
            limits: config.limits,
            interest: config.interest,
            id_prefix: config.zones.as_ref().map(|zones| zones.process),
        }
    }
}

/// One call into the core, with its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RelayInput {
    /// [`Relay::join`].
    Join {
        /// The name given.
        name: String,
        /// Where it came from.
        addr: Option<std::net::SocketAddr>,
        /// How it is linked.
        link: Link,
        /// Whether it said it is a bot.
        is_bot: bool,
    },
    /// [`Relay::describe`].
    Describe {
        /// Who.
        id: u32,
        /// Its name.
        name: String,
        /// Whether it is a bot.
        is_bot: bool,
    },
    /// [`Relay::transform`].
    Transform {
        /// Who sent it.
        id: u32,
        /// What.
        transform: Transform,
        /// The server's clock.
        now_ms: u64,
    },
    /// [`Relay::admit`].
    Admit {
        /// Who sent it.
        id: u32,
        /// What.
        transform: Transform,
        /// The server's clock.
        now_ms: u64,
    },
    /// [`Relay::relay_admitted`].
    RelayAdmitted {
        /// Who sent it.
        id: u32,
        /// What.
        transform: Transform,
        /// The server's clock.
        now_ms: u64,
    },
    /// [`Relay::leave`].
    Leave {
        /// Who.
        id: u32,
    },
    /// [`Relay::take_id`].
    TakeId {
        /// The player as it joined.
        id: u32,
        /// The id it was handed over with.
        wanted: u32,
    },
    /// [`Relay::take_abusive`].
    TakeAbusive,
    /// [`Relay::malformed_line`].
    MalformedLine,
}

/// One record after the header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RelayRecord {
    /// A call, and a hash of what it answered (FNV-1a of its answer's
    /// bytes: recipients, events, transforms as bincode).
    Call {
        /// The call.
        input: RelayInput,
        /// Its answer's hash.
        answer: u64,
    },
    /// The recording stopped early (why); the last record.
    Stopped(String),
    /// The relay stopped; the last record.
    End,
    /// The core when the recording began ([`Relay::snapshot`]), for a
    /// recording started while the relay ran: the first record after the
    /// header.
    ///
    /// [`Relay::snapshot`]: crate::Relay::snapshot
    Snapshot(Vec<u8>),
}

/// A core's answer, for its hash.
pub(crate) enum Answer<'a> {
    Nothing,
    Flag(bool),
    Joined(u32, &'a [Outgoing]),
    Out(&'a [Outgoing]),
    Abusive(&'a [(u32, String)]),
}

impl Answer<'_> {
    pub(super) fn hash(&self) -> u64 {
        let mut bytes = Vec::with_capacity(64);
        let outgoing = |bytes: &mut Vec<u8>, out: &[Outgoing]| {
            for (to, event) in out {
                bytes.extend((to.len() as u32).to_le_bytes());
                to.iter().for_each(|id| bytes.extend(id.to_le_bytes()));
                match event {
                    RelayEvent::Welcome { player_id } => {
                        bytes.push(0);
                        bytes.extend(player_id.to_le_bytes());
                    }
                    RelayEvent::Transform {
                        player_id,
                        server_time_ms,
                        transform,
                    } => {
                        bytes.push(1);
                        bytes.extend(player_id.to_le_bytes());
                        bytes.extend(server_time_ms.to_le_bytes());
                        if let Ok(encoded) = switchboard::codec::encode_value(&**transform) {
                            bytes.extend(encoded);
                        }
                    }
                    RelayEvent::Left { player_id } => {
                        bytes.push(2);
                        bytes.extend(player_id.to_le_bytes());
                    }
                }
            }
        };
        match self {
            Answer::Nothing => {}
            Answer::Flag(flag) => bytes.push(u8::from(*flag)),
            Answer::Joined(id, out) => {
                bytes.extend(id.to_le_bytes());
                outgoing(&mut bytes, out);
            }
            Answer::Out(out) => outgoing(&mut bytes, out),
            Answer::Abusive(list) => {
                for (id, why) in *list {
                    bytes.extend(id.to_le_bytes());
                    bytes.extend(why.as_bytes());
                }
            }
        }
        fnv1a(&bytes)
    }
}

/// A relay's calls as a [`Recording`]: each input with the hash of what
/// the relay answered (made on the relay's path: the answer is borrowed).
pub struct Calls;

impl Recording for Calls {
    type Item = RelayRecord;
    type Record = RelayRecord;
    const SERVER: &'static str = "relay";

    fn record(item: RelayRecord) -> RelayRecord {
        item
    }

    fn last(stopped: Option<String>) -> RelayRecord {
        stopped.map_or(RelayRecord::End, RelayRecord::Stopped)
    }
}

/// Records a relay's calls to a file, off the relay's path: the one
/// [`Recorder`] (`status`, `stop`, `finish`, `path`, `stopped`), begun
/// with a relay's header.
#[derive(Debug)]
pub struct RelayRecorder(Recorder<Calls>);

impl std::ops::Deref for RelayRecorder {
    type Target = Recorder<Calls>;

    fn deref(&self) -> &Recorder<Calls> {
        &self.0
    }
}

/// The relay's recording now (the last one, once stopped), if there has
/// been one: shared by its handle (status, stop, start) and its task.
#[derive(Debug, Clone, Default)]
pub(crate) struct Current(Arc<Mutex<Option<Arc<RelayRecorder>>>>);

impl Current {
    pub(crate) fn get(&self) -> Option<Arc<RelayRecorder>> {
        self.0.lock().expect("recording lock").clone()
    }

    /// Makes `recorder` the current one; the one before, if any.
    pub(crate) fn replace(&self, recorder: Arc<RelayRecorder>) -> Option<Arc<RelayRecorder>> {
        self.0.lock().expect("recording lock").replace(recorder)
    }
}

impl RelayRecorder {
    /// Starts a recording of a relay made with these settings at `path`,
    /// holding at most `queue` records waiting for the disk.
    pub fn create(
        path: impl Into<PathBuf>,
        header: RelayHeader,
        queue: usize,
    ) -> std::io::Result<Self> {
        Self::create_from(path, header, None, queue)
    }

    /// [`create`](Self::create), for a relay that already runs: the file
    /// starts from `snapshot` ([`Relay::snapshot`](crate::Relay::snapshot)).
    pub fn create_from(
        path: impl Into<PathBuf>,
        header: RelayHeader,
        snapshot: Option<Vec<u8>>,
        queue: usize,
    ) -> std::io::Result<Self> {
        let first = snapshot.map(RelayRecord::Snapshot);
        Recorder::create(path, &header, first, queue).map(Self)
    }

    pub(crate) fn call(&self, input: RelayInput, answer: Answer<'_>) {
        self.0.send(RelayRecord::Call {
            input,
            answer: answer.hash(),
        });
    }
}

impl crate::hub::Relay {
    /// Records every call from now on (`crate::record`): into a recorder
    /// made when the relay was empty, or one that starts from this relay's
    /// [`snapshot`](Self::snapshot) (`RelayRecorder::create_from`), so that
    /// a replay starts as it did.
    pub fn record_to(&mut self, recorder: std::sync::Arc<crate::record::RelayRecorder>) {
        self.recorder = Some(recorder);
    }

    /// What a recording of this relay starts with (a relay server's:
    /// [`RelayHeader::of`](crate::record::RelayHeader::of)).
    pub fn record_header(&self) -> crate::record::RelayHeader {
        crate::record::RelayHeader {
            magic: crate::record::MAGIC,
            format: crate::record::FORMAT,
            version: env!("CARGO_PKG_VERSION").to_string(),
            limits: self.limits,
            interest: self.interest,
            id_prefix: self.id_prefix,
        }
    }

    pub(crate) fn record(&self, input: impl FnOnce() -> RelayInput, answer: Answer<'_>) {
        if let Some(recorder) = &self.recorder {
            recorder.call(input(), answer);
        }
    }
}
