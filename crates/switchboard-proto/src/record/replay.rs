//! [`replay`]: a recording's inputs fed to a fresh core, each batch of
//! outputs compared with what the recorded run gave.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Header, Input, Output, Record, RecordError, RecordReader};
use crate::entropy::Entropy;
use crate::manager::core::{ManagerAction, ManagerCore};
use crate::manager::logic::GameLogic;
use crate::message::PeerId;

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

/// Replays `recording` against a fresh core whose logic `make_logic` builds
/// from the header (its `initial_state`, when the game recorded one), with
/// the recorded rules; the clock starts at `start`. Returns the logic as it
/// ends, or the first input whose outputs differ.
pub fn replay<L: GameLogic, R: Read>(
    mut recording: RecordReader<R>,
    make_logic: impl FnOnce(&Header) -> L,
    start: Instant,
) -> Result<ReplayReport<L>, ReplayError> {
    let entropy = Recorded::default();
    let drawn = entropy.bytes.clone();
    let header = recording.header().clone();
    let logic = make_logic(&header);
    let mut core = ManagerCore::new(header.rules.clone(), logic, Box::new(entropy));
    let (mut now, mut span) = (start, Duration::ZERO);
    let (mut inputs, mut outputs) = (0, 0);
    let mut pending: Option<(u64, Input)> = None;
    let mut stopped = None;
    while let Some(record) = recording.next_record()? {
        let number = recording.records_read();
        match record {
            Record::Input {
                after_micros,
                input,
            } => {
                if pending.is_some() {
                    let what = "an input without the outputs of the one before";
                    return Err(ReplayError::OutOfOrder {
                        record: number,
                        what,
                    });
                }
                span += Duration::from_micros(after_micros);
                now = start + span;
                pending = Some((number, input));
            }
            Record::Drawn(bytes) => {
                drawn.lock().expect("replay entropy lock").0.extend(bytes);
            }
            Record::Outputs(recorded) => {
                let Some((record, input)) = pending.take() else {
                    let what = "outputs without an input";
                    return Err(ReplayError::OutOfOrder {
                        record: number,
                        what,
                    });
                };
                let actions = feed(&mut core, &input, now);
                let mut state = drawn.lock().expect("replay entropy lock");
                if std::mem::take(&mut state.1) {
                    return Err(ReplayError::EntropyRanOut { record });
                }
                state.0.clear();
                drop(state);
                let replayed = Output::of(&actions);
                if replayed != recorded {
                    return Err(ReplayError::Diverged(Box::new(Divergence {
                        record,
                        at: span,
                        input,
                        recorded,
                        replayed,
                    })));
                }
                inputs += 1;
                outputs += replayed.len() as u64;
            }
            Record::Stopped(why) => stopped = Some(why),
            Record::End => {}
        }
    }
    Ok(ReplayReport {
        logic: core.into_logic(),
        inputs,
        outputs,
        span,
        stopped,
    })
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
