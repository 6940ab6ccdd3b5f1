//! A recording's first record, and the headers of the formats before this
//! one (format 2's had no `remembered_verdicts`).

use serde::{Deserialize, Serialize};

use super::{decode_record, RecordError, FORMAT, MAGIC};
use crate::manager::config::ManagerRules;

/// What a recording starts with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// [`MAGIC`] and [`FORMAT`], checked by the reader.
    pub magic: [u8; 4],
    /// The format version.
    pub format: u16,
    /// The Switchboard version that wrote it.
    pub version: String,
    /// The game logic's type name (`std::any::type_name`).
    pub logic: String,
    /// The rules the core ran with (a replay runs with the same).
    pub rules: ManagerRules,
    /// What the game needs to build its logic as it was when the recording
    /// began (a scenario, a checkpoint, a seat count), if it gave any.
    pub initial_state: Option<Vec<u8>>,
    /// `rules.remembered_verdicts` (format 3; a format 2 header has none:
    /// its server resent nothing, and the default stands).
    pub remembered_verdicts: u64,
}

/// A header of format 1 or 2: [`Header`] without `remembered_verdicts`.
#[derive(Deserialize)]
struct HeaderUpTo2 {
    magic: [u8; 4],
    format: u16,
    version: String,
    logic: String,
    rules: ManagerRules,
    initial_state: Option<Vec<u8>>,
}

impl From<HeaderUpTo2> for Header {
    fn from(old: HeaderUpTo2) -> Self {
        let remembered_verdicts = old.rules.remembered_verdicts as u64;
        Self {
            magic: old.magic,
            format: old.format,
            version: old.version,
            logic: old.logic,
            rules: old.rules,
            initial_state: old.initial_state,
            remembered_verdicts,
        }
    }
}

impl Header {
    /// The header of a recording of `L` under `rules`.
    pub fn new<L>(rules: ManagerRules, initial_state: Option<Vec<u8>>) -> Self {
        Self {
            magic: MAGIC,
            format: FORMAT,
            version: env!("CARGO_PKG_VERSION").to_string(),
            logic: std::any::type_name::<L>().to_string(),
            remembered_verdicts: rules.remembered_verdicts as u64,
            rules,
            initial_state,
        }
    }
}

/// The header in `bytes`: of this format, or of one before it.
pub(super) fn decode(bytes: &[u8]) -> Result<Header, RecordError> {
    match decode_record::<Header>(bytes, 0) {
        Ok(header) => Ok(header),
        Err(err) => match decode_record::<HeaderUpTo2>(bytes, 0) {
            Ok(old) if old.format <= 2 => Ok(old.into()),
            _ => Err(err),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{write_record, Record, RecordReader, FORMAT};

    /// A recording stream of `header` and an `End`.
    fn recording(header: &impl Serialize) -> Vec<u8> {
        let mut out = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        write_record(&mut out, header).unwrap();
        write_record(&mut out, &Record::End).unwrap();
        out.finish().unwrap()
    }

    #[test]
    fn a_format_2_header_still_reads_and_format_3_keeps_the_remembered_verdicts() {
        // Format 2's header, field by field (its rules had no
        // remembered_verdicts: ManagerRules skips it in the layout).
        let old = (
            MAGIC,
            2u16,
            "0.1.0",
            "Board",
            ManagerRules::default(),
            None::<Vec<u8>>,
        );
        let bytes = recording(&old);
        let reader = RecordReader::new(&bytes[..]).unwrap();
        assert_eq!(reader.header().format, 2);
        assert_eq!(reader.header().rules.remembered_verdicts, 64);
        let rules = ManagerRules {
            remembered_verdicts: 7,
            ..ManagerRules::default()
        };
        let new = Header::new::<()>(rules, None);
        let bytes = recording(&new);
        let reader = RecordReader::new(&bytes[..]).unwrap();
        assert_eq!(reader.header().format, FORMAT);
        assert_eq!(reader.header().rules.remembered_verdicts, 7);
    }
}
