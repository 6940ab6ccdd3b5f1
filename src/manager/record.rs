//! Recording a manager's session to a file (`ManagerConfig::record`): the
//! driver hands each input, random draw and batch of outputs to a writer
//! thread through a bounded queue; the thread summarizes, compresses and
//! writes them (`crate::record` has the format and the replay).
//! When the queue is full the recording stops, says why in the log and in
//! the file, and the game goes on.
//!
//! A recording starts with the server (`ManagerConfig::record`) or while it
//! runs (`ManagerHandle::start_recording`, the admin page's start button):
//! then its first record is a snapshot of the core and its game
//! (`ManagerCore::capture`), which the replay puts back before the first
//! input.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::record::{write_record, Header, Input, Output, Record};
use flate2::write::ZlibEncoder;
use switchboard_proto::manager::core::{Snapshot, SnapshotError};

use super::{ManagerAction, ManagerEvent, ManagerRules};
use crate::message::{Message, PeerId};
use crate::session::{Entropy, OsEntropy};

/// Why a recording did not start ([`ManagerHandle::start_recording`](super::ManagerHandle::start_recording);
/// a relay's, `RelayHandle::start_recording`, with the relay's snapshot
/// error as `S`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartRecordingError<S = SnapshotError> {
    /// One runs already (to this file): stop it first.
    #[error("already recording to {} (stop it first)", .0.display())]
    AlreadyRecording(PathBuf),
    /// The server's state could not be captured (a game that takes no
    /// snapshot, most often).
    #[error(transparent)]
    Snapshot(S),
    /// The file could not be created or its header written.
    #[error("{}: {source}", path.display())]
    File {
        /// The file asked for.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The server stopped before it answered.
    #[error("the server has stopped")]
    Stopped,
}

impl From<SnapshotError> for StartRecordingError {
    fn from(err: SnapshotError) -> Self {
        StartRecordingError::Snapshot(err)
    }
}

/// Where and how a server records its session (`ManagerConfig::record`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordConfig {
    /// The file (created, or truncated).
    pub path: PathBuf,
    /// Records waiting for the writer at most (default 65,536): past it
    /// the recording stops with a logged reason and the game goes on.
    pub queue: usize,
    /// What the game needs to build its logic as it is now (a scenario, a
    /// checkpoint, a seat count), kept in the header for the replay.
    pub initial_state: Option<Vec<u8>>,
}

impl RecordConfig {
    /// Records to `path` with the default queue and no initial state.
    pub fn to(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            queue: 65_536,
            initial_state: None,
        }
    }
}

/// What the driver hands the writer: cheap to make on the hot path (a
/// message is a shared buffer; outputs are summarized on the writer's
/// thread).
enum Item {
    Received {
        after_nanos: u64,
        peer: PeerId,
        message: Message,
    },
    Record(Record),
    Outputs(Vec<ManagerAction>),
}

/// Where a recording stands (`ManagerHandle::recording`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingStatus {
    /// Its file.
    pub path: PathBuf,
    /// Still recording.
    pub recording: bool,
    /// The file is complete (it ends with `End` or `Stopped`): it can be
    /// replayed, or downloaded from the admin page.
    pub complete: bool,
    /// Why it stopped before the server did, if it did.
    pub stopped: Option<String>,
}

/// The queue's sending end, shared by the recorder, the core's entropy and
/// the manager's handle; `None` once the recording stopped.
pub(crate) struct Queue {
    path: PathBuf,
    tx: Mutex<Option<SyncSender<Item>>>,
    stopped: Mutex<Option<String>>,
    complete: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").field("path", &self.path).finish()
    }
}

impl Queue {
    /// Stops the recording now, saying `why` in the file; `false` if it
    /// had stopped already.
    pub(crate) fn stop(&self, why: &str) -> bool {
        let mut tx = self.tx.lock().expect("recording queue lock");
        if tx.is_none() {
            return false;
        }
        // The reason first: the writer reads it once the queue closes.
        *self.stopped.lock().expect("recording reason lock") = Some(why.to_string());
        *tx = None;
        true
    }

    /// Where the recording stands.
    pub(crate) fn status(&self) -> RecordingStatus {
        RecordingStatus {
            path: self.path.clone(),
            recording: self.tx.lock().expect("recording queue lock").is_some(),
            complete: self.complete.load(std::sync::atomic::Ordering::Acquire),
            stopped: self.stopped.lock().expect("recording reason lock").clone(),
        }
    }

    /// Queues `item`; on a full queue, stops the recording.
    fn send(&self, item: Item) {
        let mut tx = self.tx.lock().expect("recording queue lock");
        let Some(sender) = tx.as_ref() else { return };
        match sender.try_send(item) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                let why = "its queue was full: the disk is slower than the game".to_string();
                tracing::warn!("recording stopped: {why}");
                *self.stopped.lock().expect("recording reason lock") = Some(why);
                *tx = None;
            }
            Err(TrySendError::Disconnected(_)) => *tx = None,
        }
    }
}

/// The recording now, if any: shared by the manager's handle (status,
/// stop), the core's entropy (draws) and the driver (which starts one).
#[derive(Debug, Clone, Default)]
pub(crate) struct Current(Arc<Mutex<Option<Arc<Queue>>>>);

impl Current {
    fn queue(&self) -> Option<Arc<Queue>> {
        self.0.lock().expect("current recording lock").clone()
    }

    /// Where the recording stands, if there has been one.
    pub(crate) fn status(&self) -> Option<RecordingStatus> {
        self.queue().map(|queue| queue.status())
    }

    /// Stops it, saying `why` in the file; `false` if nothing is recorded.
    pub(crate) fn stop(&self, why: &str) -> bool {
        self.queue().is_some_and(|queue| queue.stop(why))
    }

    fn set(&self, queue: Arc<Queue>) {
        *self.0.lock().expect("current recording lock") = Some(queue);
    }

    /// The OS's random bytes, each draw recorded while a recording runs:
    /// the core draws from this whether or not one does.
    pub(crate) fn entropy(&self) -> Box<dyn Entropy> {
        Box::new(RecordedEntropy(self.clone()))
    }
}

/// The driver's side of a recording.
pub(crate) struct Recorder {
    queue: Arc<Queue>,
    last: Option<Instant>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    /// Creates the file, writes the header (and the snapshot the recording
    /// starts from, taken at the given moment, if it starts mid-game),
    /// starts the writer, and makes it `current`.
    pub(crate) fn start<L>(
        config: &RecordConfig,
        rules: &ManagerRules,
        snapshot: Option<(Snapshot, Instant)>,
        current: &Current,
    ) -> std::io::Result<Self> {
        let file = std::fs::File::create(&config.path)?;
        let mut out = ZlibEncoder::new(BufWriter::new(file), flate2::Compression::fast());
        write_record(
            &mut out,
            &Header::new::<L>(rules.clone(), config.initial_state.clone()),
        )?;
        let last = snapshot.as_ref().map(|(_, at)| *at);
        if let Some((snapshot, _)) = snapshot {
            write_record(&mut out, &Record::Snapshot(snapshot))?;
        }
        let (tx, rx) = sync_channel(config.queue.max(1));
        let queue = Arc::new(Queue {
            path: config.path.clone(),
            tx: Mutex::new(Some(tx)),
            stopped: Mutex::new(None),
            complete: std::sync::atomic::AtomicBool::new(false),
        });
        let stopped = queue.clone();
        let path = config.path.display().to_string();
        let writer = std::thread::Builder::new()
            .name("switchboard-record".into())
            .spawn(move || {
                if let Err(err) = write_all(rx, out, &stopped) {
                    tracing::warn!(%path, %err, "the recording could not be written");
                }
            })?;
        current.set(queue.clone());
        Ok(Self {
            queue,
            // After a snapshot, the first input comes as long after it as
            // it did: the replay's clock starts at the snapshot.
            last,
            writer: Some(writer),
        })
    }

    /// Nanoseconds since the last input: exact, so that the replay's clock
    /// compares as the recorded one did (microseconds, summed, drifted: a
    /// 50 ms sync came a tick late in a replay).
    fn after(&mut self, now: Instant) -> u64 {
        let after = self.last.map_or(0, |last| {
            now.saturating_duration_since(last).as_nanos() as u64
        });
        self.last = Some(now);
        after
    }

    /// A network event, before the core takes it in.
    pub(crate) fn event(&mut self, event: &ManagerEvent, now: Instant) {
        let after_nanos = self.after(now);
        let item = match event {
            ManagerEvent::Received { peer, message } => Item::Received {
                after_nanos,
                peer: *peer,
                message: message.clone(),
            },
            other => Item::Record(Record::Input {
                after_nanos,
                input: Input::of(other),
            }),
        };
        self.queue.send(item);
    }

    /// An input that is not a network event (the clock's work, a kick).
    pub(crate) fn input(&mut self, input: Input, now: Instant) {
        let after_nanos = self.after(now);
        self.queue
            .send(Item::Record(Record::Input { after_nanos, input }));
    }

    /// What the core did about the last input.
    pub(crate) fn outputs(&mut self, actions: &[ManagerAction]) {
        self.queue.send(Item::Outputs(actions.to_vec()));
    }

    /// Stops recording and waits until the file is complete.
    pub(crate) async fn finish(mut self) {
        *self.queue.tx.lock().expect("recording queue lock") = None;
        if let Some(writer) = self.writer.take() {
            let _ = tokio::task::spawn_blocking(move || writer.join()).await;
        }
    }
}

/// The OS's random bytes, each draw recorded while a recording runs.
struct RecordedEntropy(Current);

impl Entropy for RecordedEntropy {
    fn fill(&mut self, bytes: &mut [u8]) {
        OsEntropy.fill(bytes);
        if let Some(queue) = self.0.queue() {
            queue.send(Item::Record(Record::Drawn(bytes.to_vec())));
        }
    }
}

/// The writer thread: every item, summarized and written, then why the
/// recording stopped early (if it did), then the end of the stream.
fn write_all(
    rx: Receiver<Item>,
    mut out: ZlibEncoder<BufWriter<std::fs::File>>,
    queue: &Queue,
) -> std::io::Result<()> {
    loop {
        let item = match rx.recv_timeout(std::time::Duration::from_secs(1)) {
            Ok(item) => item,
            // Quiet: what was written so far reaches the file, so that a
            // server that dies leaves a recording up to its last second.
            Err(RecvTimeoutError::Timeout) => {
                out.flush()?;
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let record = match item {
            Item::Received {
                after_nanos,
                peer,
                message,
            } => Record::Input {
                after_nanos,
                input: Input::of(&ManagerEvent::Received { peer, message }),
            },
            Item::Record(record) => record,
            Item::Outputs(actions) => Record::Outputs(Output::of(&actions)),
        };
        write_record(&mut out, &record)?;
    }
    let stopped = queue.stopped.lock().expect("recording reason lock").clone();
    let last = stopped.map_or(Record::End, Record::Stopped);
    write_record(&mut out, &last)?;
    out.finish()?.flush()?;
    queue
        .complete
        .store(true, std::sync::atomic::Ordering::Release);
    Ok(())
}
