//! Replaying a relay recording on a fresh core.

use std::io::Read;
use std::path::Path;

use flate2::read::ZlibDecoder;
use switchboard::record::{read_value, RecordError};

use super::{Answer, RelayHeader, RelayInput, RelayRecord, FORMAT, MAGIC};
use crate::hub::Relay;

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
pub fn replay(file: impl Read) -> Result<RelayReplay, RecordError> {
    let mut stream = ZlibDecoder::new(file);
    let header: RelayHeader = read_value(&mut stream, 0)?
        .ok_or_else(|| RecordError::NotARecording("it is empty".into()))?;
    if header.magic != MAGIC || !(1..=FORMAT).contains(&header.format) {
        return Err(RecordError::NotARecording(format!(
            "not a relay recording of format {FORMAT} (magic {:?}, format {})",
            header.magic, header.format
        )));
    }
    let mut relay = Relay::with_limits(header.limits);
    if let Some(interest) = header.interest {
        relay = relay.with_interest(interest);
    }
    if let Some(prefix) = header.id_prefix {
        relay = relay.with_id_prefix(prefix);
    }
    let mut report = RelayReplay {
        calls: 0,
        stopped: None,
        divergence: None,
    };
    let mut number = 0u64;
    loop {
        number += 1;
        let record: RelayRecord =
            read_value(&mut stream, number)?.ok_or(RecordError::CutShort {
                records: number - 1,
            })?;
        match record {
            RelayRecord::End => break,
            RelayRecord::Stopped(why) => {
                report.stopped = Some(why);
                break;
            }
            RelayRecord::Snapshot(snapshot) if number == 1 => {
                relay
                    .restore(&snapshot)
                    .map_err(|reason| RecordError::Corrupt {
                        record: number,
                        reason,
                    })?;
            }
            RelayRecord::Snapshot(_) => {
                return Err(RecordError::Corrupt {
                    record: number,
                    reason: "a snapshot after the recording began".into(),
                })
            }
            RelayRecord::Call { input, answer } => {
                report.calls += 1;
                let replayed = relay.replay_call(&input);
                if replayed != answer {
                    report.divergence = Some(RelayDivergence {
                        record: number,
                        input,
                        recorded: answer,
                        replayed,
                    });
                    return Ok(report);
                }
            }
        }
    }
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest)?;
    if !rest.is_empty() {
        return Err(RecordError::Corrupt {
            record: number + 1,
            reason: format!("{} bytes after the last record", rest.len()),
        });
    }
    Ok(report)
}

impl Relay {
    /// Makes the call `input` describes; the hash of its answer.
    fn replay_call(&mut self, input: &RelayInput) -> u64 {
        match input.clone() {
            RelayInput::Join {
                name,
                addr,
                link,
                is_bot,
            } => {
                let (id, out) = self.join(&name, addr, link, is_bot);
                Answer::Joined(id, &out).hash()
            }
            RelayInput::Describe { id, name, is_bot } => {
                self.describe(id, &name, is_bot);
                Answer::Nothing.hash()
            }
            RelayInput::Transform {
                id,
                transform,
                now_ms,
            } => Answer::Out(&self.transform(id, transform, now_ms)).hash(),
            RelayInput::Admit {
                id,
                transform,
                now_ms,
            } => Answer::Flag(self.admit(id, &transform, now_ms)).hash(),
            RelayInput::RelayAdmitted {
                id,
                transform,
                now_ms,
            } => Answer::Out(&self.relay_admitted(id, transform, now_ms)).hash(),
            RelayInput::Leave { id } => Answer::Out(&self.leave(id)).hash(),
            RelayInput::TakeId { id, wanted } => Answer::Flag(self.take_id(id, wanted)).hash(),
            RelayInput::TakeAbusive => Answer::Abusive(&self.take_abusive()).hash(),
            RelayInput::MalformedLine => {
                self.malformed_line();
                Answer::Nothing.hash()
            }
        }
    }
}
