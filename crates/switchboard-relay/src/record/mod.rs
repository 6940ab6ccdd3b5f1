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
//! `End` (or `Stopped`) last. It is written by a thread of its own through
//! a bounded queue, in batches of 256 calls (or a second's, when calls are
//! few): when the queue is full the recording stops, says why, and the
//! relay goes on.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use flate2::write::ZlibEncoder;
use serde::{Deserialize, Serialize};
use switchboard::record::{fnv1a, write_record};

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

/// Records a relay's calls to a file, off the relay's path.
#[derive(Debug)]
pub struct RelayRecorder {
    queue: Mutex<Queue>,
    stopped: Arc<Mutex<Option<String>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    path: PathBuf,
}

/// Records go to the writer in batches: one hand-over (and one wake-up of
/// its thread) per [`BATCH`] calls, or per second when calls are few.
#[derive(Debug)]
struct Queue {
    tx: Option<SyncSender<Vec<RelayRecord>>>,
    batch: Vec<RelayRecord>,
    sent_at: std::time::Instant,
}

/// Calls per hand-over to the writer.
const BATCH: usize = 256;

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
        let path = path.into();
        let file = std::fs::File::create(&path)?;
        let mut out = ZlibEncoder::new(BufWriter::new(file), flate2::Compression::fast());
        write_record(&mut out, &header)?;
        if let Some(snapshot) = snapshot {
            write_record(&mut out, &RelayRecord::Snapshot(snapshot))?;
        }
        let (tx, rx) = sync_channel::<Vec<RelayRecord>>(queue.div_ceil(BATCH).max(1));
        let stopped = Arc::new(Mutex::new(None));
        let writer = std::thread::Builder::new()
            .name("relay-recorder".into())
            .spawn(move || write_all(out, rx))?;
        Ok(Self {
            queue: Mutex::new(Queue {
                tx: Some(tx),
                batch: Vec::with_capacity(BATCH),
                sent_at: std::time::Instant::now(),
            }),
            stopped,
            writer: Mutex::new(Some(writer)),
            path,
        })
    }

    /// Where it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Why it stopped early, if it did.
    pub fn stopped(&self) -> Option<String> {
        self.stopped.lock().expect("stopped lock").clone()
    }

    /// Where it stands, for the admin page.
    pub fn status(&self) -> switchboard::manager::RecordingStatus {
        let recording = self.queue.lock().expect("queue lock").tx.is_some();
        let complete = self
            .writer
            .lock()
            .expect("writer lock")
            .as_ref()
            .is_none_or(std::thread::JoinHandle::is_finished);
        switchboard::manager::RecordingStatus {
            path: self.path.clone(),
            recording,
            complete: !recording && complete,
            stopped: self.stopped(),
        }
    }

    /// Stops recording (the file ends with `Stopped(why)`); the relay goes
    /// on. `false` if it had stopped already.
    pub fn stop(&self, why: &str) -> bool {
        let mut queue = self.queue.lock().expect("queue lock");
        let Some(tx) = queue.tx.take() else {
            return false;
        };
        let mut last = std::mem::take(&mut queue.batch);
        last.push(RelayRecord::Stopped(why.to_string()));
        let _ = tx.send(last);
        *self.stopped.lock().expect("stopped lock") = Some(why.to_string());
        true
    }

    pub(crate) fn call(&self, input: RelayInput, answer: Answer<'_>) {
        let mut queue = self.queue.lock().expect("queue lock");
        if queue.tx.is_none() {
            return;
        }
        queue.batch.push(RelayRecord::Call {
            input,
            answer: answer.hash(),
        });
        if queue.batch.len() < BATCH && queue.sent_at.elapsed() < std::time::Duration::from_secs(1)
        {
            return;
        }
        let batch = std::mem::replace(&mut queue.batch, Vec::with_capacity(BATCH));
        queue.sent_at = std::time::Instant::now();
        let Some(tx) = queue.tx.as_ref() else { return };
        if let Err(TrySendError::Full(batch)) = tx.try_send(batch) {
            let why = "its queue was full: the disk is slower than the relay".to_string();
            tracing::warn!("relay recording stopped: {why}");
            let mut last = batch;
            last.push(RelayRecord::Stopped(why.clone()));
            let _ = tx.send(last);
            *self.stopped.lock().expect("stopped lock") = Some(why);
            queue.tx = None;
        }
    }

    /// Ends the recording (its last record) and waits for the file.
    pub fn finish(&self) {
        let mut queue = self.queue.lock().expect("queue lock");
        if let Some(tx) = queue.tx.take() {
            let mut last = std::mem::take(&mut queue.batch);
            last.push(RelayRecord::End);
            let _ = tx.send(last);
        }
        drop(queue);
        if let Some(writer) = self.writer.lock().expect("writer lock").take() {
            let _ = writer.join();
        }
    }
}

impl Drop for RelayRecorder {
    fn drop(&mut self) {
        self.finish();
    }
}

fn write_all(mut out: ZlibEncoder<BufWriter<std::fs::File>>, rx: Receiver<Vec<RelayRecord>>) {
    'batches: for batch in rx {
        for record in batch {
            let last = matches!(record, RelayRecord::End | RelayRecord::Stopped(_));
            if let Err(err) = write_record(&mut out, &record) {
                tracing::error!(%err, "relay recording: cannot write");
                return;
            }
            if last {
                break 'batches;
            }
        }
    }
    if let Err(err) = out.finish().and_then(|mut file| file.flush()) {
        tracing::error!(%err, "relay recording: cannot finish the file");
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
