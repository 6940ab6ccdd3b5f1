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

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::record::{Header, Input, Output, Record};
use crate::recorder::{Recorder, Recording};
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
pub(crate) enum Item {
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

/// A manager's session as a [`Recording`]: inputs, random draws and
/// outputs, the messages and actions summarized on the writer's thread.
pub(crate) struct Session;

impl Recording for Session {
    type Item = Item;
    type Record = Record;
    const SERVER: &'static str = "game";

    fn record(item: Item) -> Record {
        match item {
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
        }
    }

    fn last(stopped: Option<String>) -> Record {
        stopped.map_or(Record::End, Record::Stopped)
    }
}

/// The recording now, if any: shared by the manager's handle (status,
/// stop), the core's entropy (draws) and the driver (which starts one).
#[derive(Debug, Clone, Default)]
pub(crate) struct Current(Arc<Mutex<Option<Arc<Recorder<Session>>>>>);

impl Current {
    fn queue(&self) -> Option<Arc<Recorder<Session>>> {
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

    fn set(&self, queue: Arc<Recorder<Session>>) {
        *self.0.lock().expect("current recording lock") = Some(queue);
    }

    /// The OS's random bytes, each draw recorded while a recording runs:
    /// the core draws from this whether or not one does.
    pub(crate) fn entropy(&self) -> Box<dyn Entropy> {
        Box::new(RecordedEntropy(self.clone()))
    }
}

/// The driver's side of a recording: the file's writer, and when the last
/// input came.
pub(crate) struct SessionRecorder {
    file: Arc<Recorder<Session>>,
    last: Option<Instant>,
}

impl SessionRecorder {
    /// Creates the file, writes the header (and the snapshot the recording
    /// starts from, taken at the given moment, if it starts mid-game),
    /// starts the writer, and makes it `current`.
    pub(crate) fn start<L>(
        config: &RecordConfig,
        rules: &ManagerRules,
        snapshot: Option<(Snapshot, Instant)>,
        current: &Current,
    ) -> std::io::Result<Self> {
        let header = Header::new::<L>(rules.clone(), config.initial_state.clone());
        // After a snapshot, the first input comes as long after it as it
        // did: the replay's clock starts at the snapshot.
        let last = snapshot.as_ref().map(|(_, at)| *at);
        let first = snapshot.map(|(snapshot, _)| Record::Snapshot(snapshot));
        let file = Arc::new(Recorder::create(
            &config.path,
            &header,
            first,
            config.queue,
        )?);
        current.set(file.clone());
        Ok(Self { file, last })
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
        self.file.send(item);
    }

    /// An input that is not a network event (the clock's work, a kick).
    pub(crate) fn input(&mut self, input: Input, now: Instant) {
        let after_nanos = self.after(now);
        self.file
            .send(Item::Record(Record::Input { after_nanos, input }));
    }

    /// What the core did about the last input.
    pub(crate) fn outputs(&mut self, actions: &[ManagerAction]) {
        self.file.send(Item::Outputs(actions.to_vec()));
    }

    /// Stops recording and waits until the file is complete.
    pub(crate) async fn finish(self) {
        let file = self.file;
        let _ = tokio::task::spawn_blocking(move || file.finish()).await;
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
