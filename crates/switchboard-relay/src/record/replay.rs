//! Replaying a relay recording on a fresh core.

use std::io::Read;
use std::path::Path;

use flate2::read::ZlibDecoder;
use switchboard::record::{read_value, RecordError, ReplayError};

use super::{Answer, RelayHeader, RelayInput, RelayRecord, FORMAT, MAGIC};
use crate::hub::{Outgoing, Relay};

/// Where a replay first gave another answer than the recording.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayDivergence {
    /// The record's number (the header is 0).
    pub record: u64,
    /// The call.
    pub input: RelayInput,
    /// The recorded answer's hash, and the replay's.
    pub recorded: u64,
    /// The replay's answer's hash.
    pub replayed: u64,
}

/// What a replay found.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayReplay {
    /// Calls replayed.
    pub calls: u64,
    /// Whether the recording was complete (`End`), or why it stopped.
    pub stopped: Option<String>,
    /// The first call whose answer differed, if one did.
    pub divergence: Option<RelayDivergence>,
}

/// Whether the file at `path` is a relay recording (its header's magic).
pub fn is_relay_recording(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut stream = ZlibDecoder::new(std::io::BufReader::new(file));
    matches!(read_value::<RelayHeader>(&mut stream, 0), Ok(Some(h)) if h.magic == MAGIC)
}

/// Replays a relay recording on a fresh core; stops at the first call
/// whose answer differs. A cut or corrupted file is an error, never a
/// panic.
pub fn replay(file: impl Read) -> Result<RelayReplay, ReplayError> {
    let mut replayer = RelayReplayer::new(file)?;
    let mut report = RelayReplay {
        calls: 0,
        stopped: None,
        divergence: None,
    };
    while let Some(call) = replayer.next_step()? {
        report.calls += 1;
        if let Some(divergence) = call.divergence() {
            report.divergence = Some(divergence);
            return Ok(report);
        }
    }
    report.stopped = replayer.stopped;
    Ok(report)
}

/// One call replayed: what went in, what the core answered (who is sent
/// what), and the recorded and replayed hashes of that answer.
#[derive(Debug, Clone)]
pub struct ReplayedCall {
    /// The record's number (the header is 0).
    pub record: u64,
    /// The call.
    pub input: RelayInput,
    /// What the replayed core sent, to whom.
    pub out: Vec<Outgoing>,
    /// The recorded answer's hash.
    pub recorded: u64,
    /// The replay's.
    pub replayed: u64,
}

impl ReplayedCall {
    /// Where the replay left the recording, if this call's answer differs.
    pub fn divergence(&self) -> Option<RelayDivergence> {
        (self.recorded != self.replayed).then(|| RelayDivergence {
            record: self.record,
            input: self.input.clone(),
            recorded: self.recorded,
            replayed: self.replayed,
        })
    }
}

/// A relay recording fed to a fresh core call by call ([`replay`] runs it
/// to the end; `record::watch` serves it to spectators).
pub struct RelayReplayer<R: Read> {
    stream: ZlibDecoder<R>,
    relay: Relay,
    number: u64,
    done: bool,
    /// Why the recording stopped early, once its last record is read.
    pub stopped: Option<String>,
}

impl<R: Read> std::fmt::Debug for RelayReplayer<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayReplayer")
            .field("record", &self.number)
            .finish_non_exhaustive()
    }
}

impl<R: Read> RelayReplayer<R> {
    /// Reads the header and builds the core it describes (the shape of
    /// the manager's `Replayer`: `new`, `next_step`, `core`).
    pub fn new(file: R) -> Result<Self, ReplayError> {
        let mut stream = ZlibDecoder::new(file);
        let header: RelayHeader = read_value(&mut stream, 0)?
            .ok_or_else(|| RecordError::NotARecording("it is empty".into()))?;
        if header.magic != MAGIC || !(1..=FORMAT).contains(&header.format) {
            return Err(RecordError::NotARecording(format!(
                "not a relay recording of format {FORMAT} (magic {:?}, format {})",
                header.magic, header.format
            ))
            .into());
        }
        let mut relay = Relay::with_limits(header.limits);
        if let Some(interest) = header.interest {
            relay = relay.with_interest(interest);
        }
        if let Some(prefix) = header.id_prefix {
            relay = relay.with_id_prefix(prefix);
        }
        Ok(Self {
            stream,
            relay,
            number: 0,
            done: false,
            stopped: None,
        })
    }

    /// The core, as far as the replay has gone.
    pub fn core(&self) -> &Relay {
        &self.relay
    }

    /// The next call, made on the core; `None` after the last record.
    pub fn next_step(&mut self) -> Result<Option<ReplayedCall>, ReplayError> {
        while !self.done {
            self.number += 1;
            let number = self.number;
            let record: RelayRecord =
                read_value(&mut self.stream, number)?.ok_or(RecordError::CutShort {
                    records: number - 1,
                })?;
            match record {
                RelayRecord::End => self.end()?,
                RelayRecord::Stopped(why) => {
                    self.stopped = Some(why);
                    self.end()?;
                }
                RelayRecord::Snapshot(snapshot) if number == 1 => self
                    .relay
                    .restore(&snapshot)
                    .map_err(|err| RecordError::Corrupt {
                        record: number,
                        reason: err.to_string(),
                    })?,
                RelayRecord::Snapshot(_) => {
                    return Err(RecordError::Corrupt {
                        record: number,
                        reason: "a snapshot after the recording began".into(),
                    }
                    .into())
                }
                RelayRecord::Call { input, answer } => {
                    let (replayed, out) = self.relay.replay_call(&input);
                    return Ok(Some(ReplayedCall {
                        record: number,
                        input,
                        out,
                        recorded: answer,
                        replayed,
                    }));
                }
            }
        }
        Ok(None)
    }

    /// After the last record: nothing more in the stream, whose own
    /// checksum holds.
    fn end(&mut self) -> Result<(), RecordError> {
        self.done = true;
        let mut rest = Vec::new();
        self.stream.read_to_end(&mut rest)?;
        if !rest.is_empty() {
            return Err(RecordError::Corrupt {
                record: self.number + 1,
                reason: format!("{} bytes after the last record", rest.len()),
            });
        }
        Ok(())
    }
}

impl Relay {
    /// Makes the call `input` describes: the hash of its answer, and what
    /// it sent to whom.
    fn replay_call(&mut self, input: &RelayInput) -> (u64, Vec<Outgoing>) {
        let out = |out: Vec<Outgoing>| (Answer::Out(&out).hash(), out);
        match input.clone() {
            RelayInput::Join {
                name,
                addr,
                link,
                is_bot,
            } => {
                let (id, out) = self.join(&name, addr, link, is_bot);
                (Answer::Joined(id, &out).hash(), out)
            }
            RelayInput::Describe { id, name, is_bot } => {
                self.describe(id, &name, is_bot);
                (Answer::Nothing.hash(), Vec::new())
            }
            RelayInput::Transform {
                id,
                transform,
                now_ms,
            } => out(self.transform(id, transform, now_ms)),
            RelayInput::Admit {
                id,
                transform,
                now_ms,
            } => (
                Answer::Flag(self.admit(id, &transform, now_ms)).hash(),
                Vec::new(),
            ),
            RelayInput::RelayAdmitted {
                id,
                transform,
                now_ms,
            } => out(self.relay_admitted(id, transform, now_ms)),
            RelayInput::Leave { id } => out(self.leave(id)),
            RelayInput::TakeId { id, wanted } => {
                (Answer::Flag(self.take_id(id, wanted)).hash(), Vec::new())
            }
            RelayInput::TakeAbusive => (Answer::Abusive(&self.take_abusive()).hash(), Vec::new()),
            RelayInput::MalformedLine => {
                self.malformed_line();
                (Answer::Nothing.hash(), Vec::new())
            }
        }
    }
}
