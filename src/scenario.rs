//! Versioned save files for a game's authoritative state.
//!
//! A game's `ServerScenario` is plain serde data; this module turns it into a
//! file and back, refusing anything that is not exactly what it wrote:
//!
//! ```text
//! +--------+-------------+----------------+----------------+----------------------+
//! | magic  | version u16 | length u32     | crc32 u32      | bincode payload      |
//! | 4 B    | big-endian  | of the payload | of the payload | `length` bytes       |
//! +--------+-------------+----------------+----------------+----------------------+
//! ```
//!
//! A wrong magic, another version, a short file, a bad checksum, trailing
//! bytes or a payload that does not decode is a [`ScenarioError`], never a
//! panic. The scenario editor saves with [`save`]; the server loads with
//! [`load`].

use std::path::Path;

use serde::{de::DeserializeOwned, Serialize};

use crate::codec::{self, ContentError};

const HEADER: usize = 4 + 2 + 4 + 4;

/// The largest payload read (64 MiB); a header claiming more is refused.
pub const MAX_FILE_PAYLOAD: u32 = 64 * 1024 * 1024;

/// Why a scenario file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The file could not be read or written.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The file does not start with this game's magic.
    #[error("not a scenario file of this game")]
    NotAScenario,
    /// The file was written by another format version.
    #[error("scenario format version {found}; this build reads version {expected}")]
    WrongVersion {
        /// The file's version.
        found: u16,
        /// The version this build reads.
        expected: u16,
    },
    /// The file is shorter than its header says.
    #[error("scenario file is truncated ({have} of {need} bytes)")]
    Truncated {
        /// Bytes present.
        have: usize,
        /// Bytes the header announces.
        need: usize,
    },
    /// The header claims a payload over [`MAX_FILE_PAYLOAD`].
    #[error("scenario payload of {0} bytes is over the limit")]
    TooLarge(u32),
    /// The payload does not match its checksum.
    #[error("scenario file is corrupt (checksum mismatch)")]
    Corrupt,
    /// More bytes follow the payload.
    #[error("{0} unexpected bytes after the scenario")]
    TrailingBytes(usize),
    /// The payload does not decode as this game's scenario.
    #[error("scenario does not decode: {0}")]
    Decode(#[from] ContentError),
    /// The scenario decoded but breaks the game's rules.
    #[error("invalid scenario: {0}")]
    Invalid(String),
}

/// Encodes `value` as a scenario file's bytes.
pub fn to_bytes<T: Serialize>(
    magic: [u8; 4],
    version: u16,
    value: &T,
) -> Result<Vec<u8>, ScenarioError> {
    let payload = codec::encode_value(value)?;
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|len| *len <= MAX_FILE_PAYLOAD)
        .ok_or(ScenarioError::TooLarge(u32::MAX))?;
    let mut bytes = Vec::with_capacity(HEADER + payload.len());
    bytes.extend_from_slice(&magic);
    bytes.extend_from_slice(&version.to_be_bytes());
    bytes.extend_from_slice(&len.to_be_bytes());
    bytes.extend_from_slice(&codec::checksum(&payload).to_be_bytes());
    bytes.extend_from_slice(&payload);
    Ok(bytes)
}

/// Decodes a scenario file's bytes.
pub fn from_bytes<T: DeserializeOwned>(
    magic: [u8; 4],
    version: u16,
    bytes: &[u8],
) -> Result<T, ScenarioError> {
    if bytes.len() < 4 || bytes[..4] != magic {
        return Err(ScenarioError::NotAScenario);
    }
    if bytes.len() < HEADER {
        return Err(ScenarioError::Truncated {
            have: bytes.len(),
            need: HEADER,
        });
    }
    let found = u16::from_be_bytes([bytes[4], bytes[5]]);
    if found != version {
        return Err(ScenarioError::WrongVersion {
            found,
            expected: version,
        });
    }
    let len = u32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]);
    if len > MAX_FILE_PAYLOAD {
        return Err(ScenarioError::TooLarge(len));
    }
    let need = HEADER + len as usize;
    if bytes.len() < need {
        return Err(ScenarioError::Truncated {
            have: bytes.len(),
            need,
        });
    }
    if bytes.len() > need {
        return Err(ScenarioError::TrailingBytes(bytes.len() - need));
    }
    let sum = u32::from_be_bytes([bytes[10], bytes[11], bytes[12], bytes[13]]);
    let payload = &bytes[HEADER..];
    if codec::checksum(payload) != sum {
        return Err(ScenarioError::Corrupt);
    }
    Ok(codec::decode_value(payload)?)
}

/// Writes `value` to `path` (through a temporary file and a rename, so a
/// crash never leaves half a file).
pub fn save<T: Serialize>(
    path: &Path,
    magic: [u8; 4],
    version: u16,
    value: &T,
) -> Result<(), ScenarioError> {
    let bytes = to_bytes(magic, version, value)?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Reads a value from `path`.
pub fn load<T: DeserializeOwned>(
    path: &Path,
    magic: [u8; 4],
    version: u16,
) -> Result<T, ScenarioError> {
    let len = std::fs::metadata(path)?.len();
    if len > u64::from(MAX_FILE_PAYLOAD) + HEADER as u64 {
        return Err(ScenarioError::TooLarge(
            u32::try_from(len).unwrap_or(u32::MAX),
        ));
    }
    from_bytes(magic, version, &std::fs::read(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAGIC: [u8; 4] = *b"TEST";

    #[test]
    fn round_trip_and_every_kind_of_bad_file() {
        let value = (String::from("map"), vec![1u32, 2, 3]);
        let bytes = to_bytes(MAGIC, 3, &value).unwrap();
        assert_eq!(
            from_bytes::<(String, Vec<u32>)>(MAGIC, 3, &bytes).unwrap(),
            value
        );

        let err = |bytes: &[u8]| from_bytes::<(String, Vec<u32>)>(MAGIC, 3, bytes).unwrap_err();
        assert!(matches!(err(b"NOPE and more"), ScenarioError::NotAScenario));
        assert!(matches!(
            from_bytes::<(String, Vec<u32>)>(MAGIC, 4, &bytes).unwrap_err(),
            ScenarioError::WrongVersion {
                found: 3,
                expected: 4
            }
        ));
        assert!(matches!(
            err(&bytes[..bytes.len() - 1]),
            ScenarioError::Truncated { .. }
        ));
        assert!(matches!(err(&bytes[..8]), ScenarioError::Truncated { .. }));
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(matches!(err(&flipped), ScenarioError::Corrupt));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(err(&longer), ScenarioError::TrailingBytes(1)));
        let mut huge = bytes.clone();
        huge[6..10].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(err(&huge), ScenarioError::TooLarge(_)));
        // A valid file of another type: decodes to an error, not a panic.
        let other = to_bytes(MAGIC, 3, &7u8).unwrap();
        assert!(matches!(err(&other), ScenarioError::Decode(_)));
    }

    #[test]
    fn save_and_load_through_the_file_system() {
        let dir = std::env::temp_dir().join(format!("switchboard-scenario-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.scenario");
        save(&path, MAGIC, 1, &vec![9u8; 100]).unwrap();
        assert_eq!(load::<Vec<u8>>(&path, MAGIC, 1).unwrap(), vec![9u8; 100]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
