//! [`replay`]: a recording's inputs fed to a fresh core, each batch of
//! outputs compared with what the recorded run gave.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Header, Input, Output, Record, RecordError, RecordReader};
use crate::entropy::Entropy;
use crate::manager::core::{ManagerAction, ManagerCore, Snapshot};
use crate::manager::logic::GameLogic;
use crate::message::{Message, PeerId};
use crate::session::ClientId;

/// A replay that gave every output the recording holds.
#[derive(Debug)]
pub struct ReplayReport<L> {
    /// The logic as the replay left it.
    pub logic: L,
    /// Inputs replayed.
    pub inputs: u64,
    /// Outputs compared (sends, closes, store calls).
    pub outputs: u64,
    /// The recorded time from the first input to the last.
    pub span: Duration,
    /// Why the recording stopped early, if it did.
    pub stopped: Option<String>,
}

/// The first input whose outputs differ from the recorded ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// The input's record number (the header is 0).
    pub record: u64,
    /// Its time since the recording began.
    pub at: Duration,
    /// What went in.
    pub input: Input,
    /// What the recorded run gave out.
    pub recorded: Vec<Output>,
    /// What the replay gave out.
    pub replayed: Vec<Output>,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "record {} at {:.3} s: {:?}",
            self.record,
            self.at.as_secs_f64(),
            self.input
        )?;
        writeln!(f, "recorded: {:?}", self.recorded)?;
        write!(f, "replayed: {:?}", self.replayed)
    }
}

/// Why a replay did not get through.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The recording could not be read.
    #[error(transparent)]
    Read(#[from] RecordError),
    /// The replay gave other outputs than the recorded run: the logic is
    /// not the recorded one, or not deterministic (it reads a clock or
    /// randomness of its own).
    #[error("the replay diverged at {0}")]
    Diverged(Box<Divergence>),
    /// The replay drew more random bytes than the recorded run did at
    /// that input (it diverged inside the core).
    #[error("record {record}: the replay drew more random bytes than were recorded")]
    EntropyRanOut {
        /// The input's record number.
        record: u64,
    },
    /// The recording starts from a snapshot the replay could not put back
    /// (another build's logic, or a game that takes none).
    #[error("record {record}: {why}")]
    Snapshot {
        /// Its number.
        record: u64,
        /// Why.
        why: crate::manager::core::SnapshotError,
    },
    /// The records are not in an order a recorder writes.
    #[error("record {record}: {what}")]
    OutOfOrder {
        /// Its number.
        record: u64,
        /// What was wrong.
        what: &'static str,
    },
}

/// Random bytes as the recorded run drew them, handed out in order.
#[derive(Debug, Clone, Default)]
struct Recorded {
    bytes: Arc<Mutex<(VecDeque<u8>, bool)>>,
}

impl Entropy for Recorded {
    fn fill(&mut self, out: &mut [u8]) {
        let mut queue = self.bytes.lock().expect("replay entropy lock");
        for byte in out {
            match queue.0.pop_front() {
                Some(next) => *byte = next,
                None => {
                    *byte = 0;
                    queue.1 = true;
                }
            }
        }
    }
}

/// One input replayed: what went in, when, and everything the core did
/// about it (the full actions: a spectator is sent their messages).
#[derive(Debug)]
pub struct Step {
    /// The input's record number.
    pub record: u64,
    /// Its time since the recording began.
    pub at: Duration,
    /// What went in.
    pub input: Input,
    /// What the core did, checked against the recorded outputs.
    pub actions: Vec<ManagerAction>,
}

/// A recording fed to a fresh core input by input ([`replay`] runs it to
/// the end; a spectator server paces it).
pub struct Replayer<L: GameLogic, R: Read> {
    recording: RecordReader<R>,
    core: ManagerCore<L>,
    drawn: Arc<Mutex<(VecDeque<u8>, bool)>>,
    start: Instant,
    span: Duration,
    pending: Option<(u64, Input)>,
    /// A record [`begin`](Replayer::begin) read that was not a snapshot,
    /// with its number: the next step starts from it.
    unread: Option<(u64, Record)>,
    stopped: Option<String>,
    inputs: u64,
    outputs: u64,
}

impl<L: GameLogic, R: Read> std::fmt::Debug for Replayer<L, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replayer")
            .field("inputs", &self.inputs)
            .field("span", &self.span)
            .finish()
    }
}

impl<L: GameLogic, R: Read> Replayer<L, R> {
    /// A fresh core whose logic `make_logic` builds from the header (its
    /// `initial_state`, when the game recorded one), with the recorded
    /// rules; the clock starts at `start`.
    pub fn new(
        recording: RecordReader<R>,
        make_logic: impl FnOnce(&Header) -> L,
        start: Instant,
    ) -> Self {
        let entropy = Recorded::default();
        let drawn = entropy.bytes.clone();
        let header = recording.header().clone();
        let logic = make_logic(&header);
        let core = ManagerCore::new(header.rules.clone(), logic, Box::new(entropy));
        Self {
            recording,
            core,
            drawn,
            start,
            span: Duration::ZERO,
            pending: None,
            unread: None,
            stopped: None,
            inputs: 0,
            outputs: 0,
        }
    }

    /// Puts back the snapshot the recording begins with, if it begins
    /// with one (`true`), before any input: then [`core`](Self::core) shows
    /// the server as the recording found it. [`next_step`](Self::next_step)
    /// does this itself when it was not called.
    pub fn begin(&mut self) -> Result<bool, ReplayError> {
        if self.recording.records_read() > 0 || self.unread.is_some() {
            return Ok(false);
        }
        match self.recording.next_record()? {
            Some(Record::Snapshot(snapshot)) => {
                self.restore(&snapshot, 1)?;
                Ok(true)
            }
            Some(other) => {
                self.unread = Some((self.recording.records_read(), other));
                Ok(false)
            }
            None => Ok(false),
        }
    }

    /// What the game would send `client` coming back at this point of the
    /// replay, the replay unchanged
    /// ([`ManagerCore::view_of`](crate::manager::core::ManagerCore::view_of)).
    pub fn view_of(
        &mut self,
        client: ClientId,
    ) -> Result<Vec<Message>, crate::manager::core::SnapshotError> {
        self.core.view_of(client, self.start + self.span)
    }

    /// The snapshot that record `number` holds, put back.
    fn restore(&mut self, snapshot: &Snapshot, number: u64) -> Result<(), ReplayError> {
        if number != 1 {
            let what = "a snapshot after the recording began";
            return Err(ReplayError::OutOfOrder {
                record: number,
                what,
            });
        }
        // The replay's clock moves on so that the snapshot's earliest
        // instant lands at its start.
        self.start += snapshot.reach_back;
        self.core
            .restore(snapshot, self.start)
            .map_err(|why| ReplayError::Snapshot {
                record: number,
                why,
            })
    }

    /// The next record and its number: the one `begin` left, then the
    /// recording's.
    fn next_record(&mut self) -> Result<Option<(u64, Record)>, ReplayError> {
        if let Some(unread) = self.unread.take() {
            return Ok(Some(unread));
        }
        let record = self.recording.next_record()?;
        Ok(record.map(|record| (self.recording.records_read(), record)))
    }

    /// The next input, fed and checked; `None` after the last.
    pub fn next_step(&mut self) -> Result<Option<Step>, ReplayError> {
        while let Some((number, record)) = self.next_record()? {
            match record {
                Record::Input { after_nanos, input } => {
                    if self.pending.is_some() {
                        let what = "an input without the outputs of the one before";
                        return Err(ReplayError::OutOfOrder {
                            record: number,
                            what,
                        });
                    }
                    self.span += Duration::from_nanos(after_nanos);
                    self.pending = Some((number, input));
                }
                Record::Drawn(bytes) => {
                    self.drawn
                        .lock()
                        .expect("replay entropy lock")
                        .0
                        .extend(bytes);
                }
                Record::Outputs(recorded) => {
                    let Some((record, input)) = self.pending.take() else {
                        let what = "outputs without an input";
                        return Err(ReplayError::OutOfOrder {
                            record: number,
                            what,
                        });
                    };
                    let actions = feed(&mut self.core, &input, self.start + self.span);
                    let mut state = self.drawn.lock().expect("replay entropy lock");
                    if std::mem::take(&mut state.1) {
                        return Err(ReplayError::EntropyRanOut { record });
                    }
                    state.0.clear();
                    drop(state);
                    let replayed = Output::of(&actions);
                    if replayed != recorded {
                        return Err(ReplayError::Diverged(Box::new(Divergence {
                            record,
                            at: self.span,
                            input,
                            recorded,
                            replayed,
                        })));
                    }
                    self.inputs += 1;
                    self.outputs += replayed.len() as u64;
                    return Ok(Some(Step {
                        record,
                        at: self.span,
                        input,
                        actions,
                    }));
                }
                Record::Snapshot(snapshot) => self.restore(&snapshot, number)?,
                Record::Stopped(why) => self.stopped = Some(why),
                Record::End => {}
            }
        }
        Ok(None)
    }

    /// The core, as far as the replay has gone.
    pub fn core(&self) -> &ManagerCore<L> {
        &self.core
    }

    /// What the replay did, and the logic as it left it.
    pub fn finish(self) -> ReplayReport<L> {
        ReplayReport {
            logic: self.core.into_logic(),
            inputs: self.inputs,
            outputs: self.outputs,
            span: self.span,
            stopped: self.stopped,
        }
    }
}

/// Replays `recording` against a fresh core whose logic `make_logic` builds
/// from the header (its `initial_state`, when the game recorded one), with
/// the recorded rules; the clock starts at `start`. Returns the logic as it
/// ends, or the first input whose outputs differ.
pub fn replay<L: GameLogic, R: Read>(
    recording: RecordReader<R>,
    make_logic: impl FnOnce(&Header) -> L,
    start: Instant,
) -> Result<ReplayReport<L>, ReplayError> {
    let mut replayer = Replayer::new(recording, make_logic, start);
    while replayer.next_step()?.is_some() {}
    Ok(replayer.finish())
}

/// Gives the core one recorded input; returns what it did.
fn feed<L: GameLogic>(
    core: &mut ManagerCore<L>,
    input: &Input,
    now: Instant,
) -> Vec<ManagerAction> {
    match input {
        Input::Tick { rtts } => {
            let rtt = |peer: PeerId| {
                rtts.iter()
                    .find(|(p, _)| *p == peer.0)
                    .map(|(_, micros)| Duration::from_micros(*micros))
            };
            core.tick(now, rtt).collect()
        }
        Input::Kick { client, reason } => core.kick(*client, reason, now).1.collect(),
        other => match other.to_event() {
            Some(event) => core.handle(event, now).collect(),
            None => Vec::new(),
        },
    }
}
