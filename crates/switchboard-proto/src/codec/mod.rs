//! Bytes to frames and back: the length prefix, the flag byte, zlib, bincode.
//!
//! This is the only module that names `bincode` or `flate2` (`zlib.rs`), so
//! either can be swapped here alone.
//!
//! ```text
//! +----------------+--------+------------------------------------------+
//! | length: u32 BE | flags  | body: `length - 1` bytes                 |
//! +----------------+--------+------------------------------------------+
//!                   bit 0 = body is a zlib stream of the payload
//!                   bits 1..7 must be zero
//! ```
//!
//! The length counts the flag byte and the body, so it is at least 1. The
//! payload (the body, inflated if flag bit 0 is set) is either the handshake
//! (see `socket::handshake`) or the bincode encoding of a message envelope.
//! See `docs/PROTOCOL.md` for the byte-by-byte description.
//!
//! Every size is bounded before anything is allocated for it:
//! [`CodecConfig::max_frame_len`] before the body is buffered,
//! [`CodecConfig::max_decompressed_len`] while inflating (the declared size of
//! a zlib stream is never trusted), and while bincode decodes a value no
//! length prefix inside it can claim more bytes than the value has left
//! (`bounded.rs`).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::{de::DeserializeOwned, Serialize};

mod bounded;
mod zlib;
use bounded::Bounded;
pub use zlib::inflate;
use zlib::try_compressed_frame;

/// Bytes in the frame header: the u32 length and the flag byte.
pub const HEADER_LEN: usize = 5;

/// Flag bit 0: the body is zlib-compressed.
pub const FLAG_COMPRESSED: u8 = 0b0000_0001;

/// bincode's standard configuration (varint integers, little endian), with
/// no byte limit: decoding is bounded by [`Bounded`] instead, at a quarter of
/// the limit's cost.
fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard()
}

/// Size limits and the compression policy of the frame codec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecConfig {
    /// A payload of at least this many bytes is offered to zlib; a smaller one
    /// is always sent raw. Default 512. A compressed body that is not smaller
    /// than the raw payload is discarded and the payload is sent raw.
    pub compress_threshold: usize,
    /// zlib level, 0 (store) to 9 (smallest). Default 1: game traffic wants
    /// latency more than the last few percent of ratio.
    pub compression_level: u32,
    /// The largest frame accepted or sent, counting the flag byte and the body
    /// but not the 4-byte length (default 1 MiB). A peer announcing a longer
    /// frame gets [`FrameError::TooLarge`] before any byte of the body is
    /// buffered; a local send of a larger message fails with the same error.
    pub max_frame_len: usize,
    /// The largest payload a compressed body may inflate to (default 4 MiB),
    /// enforced while inflating. Past it: [`FrameError::DecompressedTooLarge`].
    pub max_decompressed_len: usize,
}

impl Default for CodecConfig {
    fn default() -> Self {
        Self {
            compress_threshold: 512,
            compression_level: 1,
            max_frame_len: 1024 * 1024,
            max_decompressed_len: 4 * 1024 * 1024,
        }
    }
}

/// Every way a frame can be bad. "Not enough bytes yet" is not among them:
/// the decoder simply waits for more.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length field announced more bytes than `max_frame_len` allows.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The announced (or, when sending, the actual) length.
        len: usize,
        /// The configured limit.
        max: usize,
    },
    /// The length field was zero: a frame has at least its flag byte.
    #[error("frame length is zero (a frame has at least its flag byte)")]
    Empty,
    /// The flag byte had bits set that this version does not know.
    #[error("unknown flag bits {0:#010b} in frame header")]
    UnknownFlags(u8),
    /// The compressed body is not a valid zlib stream.
    #[error("corrupt zlib body: {0}")]
    CorruptZlib(String),
    /// The compressed body ended before the zlib stream did.
    #[error("zlib stream is truncated")]
    TruncatedZlib,
    /// Inflating the body would pass `max_decompressed_len`.
    #[error("compressed body inflates past the limit of {max} bytes")]
    DecompressedTooLarge {
        /// The configured limit.
        max: usize,
    },
    /// Bytes followed the end of the zlib stream inside the body.
    #[error("{count} trailing bytes after the zlib stream")]
    TrailingBytes {
        /// How many bytes followed the stream.
        count: usize,
    },
    /// The connection ended in the middle of a frame.
    #[error("connection ended inside a frame ({buffered} bytes buffered)")]
    Truncated {
        /// Bytes of the unfinished frame that had arrived.
        buffered: usize,
    },
    /// Reading from the underlying stream failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// A value could not be turned into bytes or back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContentError {
    /// The value could not be serialized.
    #[error("cannot encode {type_name}: {reason}")]
    Encode {
        /// The Rust type being encoded.
        type_name: &'static str,
        /// What bincode said.
        reason: String,
    },
    /// The bytes are not a valid encoding of the expected type.
    #[error("content is not a valid {type_name}: {reason}")]
    Decode {
        /// The Rust type that was expected.
        type_name: &'static str,
        /// What bincode said.
        reason: String,
    },
    /// The bytes held a valid value followed by more bytes: almost always a
    /// sign that the sender encoded a different type.
    #[error("content is not a {type_name}: {extra} bytes left over after decoding")]
    LeftOver {
        /// The Rust type that was expected.
        type_name: &'static str,
        /// Bytes left after the value.
        extra: usize,
    },
}

/// A game's own errors are its words (`GameLogic::snapshot`, `restore`,
/// its reasons): `?` on the codec's results turns them into those words.
impl From<ContentError> for String {
    fn from(err: ContentError) -> String {
        err.to_string()
    }
}

/// One decoded frame: the payload, already inflated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Whether the frame travelled compressed.
    pub compressed: bool,
    /// The payload bytes.
    pub payload: Bytes,
}

/// Encodes a serde value with bincode.
pub fn encode_value<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, ContentError> {
    bincode::serde::encode_to_vec(value, bincode_config()).map_err(|err| ContentError::Encode {
        type_name: std::any::type_name::<T>(),
        reason: err.to_string(),
    })
}

/// Appends the bincode encoding of a serde value to `out`.
pub fn encode_value_into<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), ContentError> {
    encode_value_onto(value, out)
}

/// Appends the bincode encoding of a serde value to any buffer (a `Vec`, an
/// outbound queue's `BytesMut` tail). With [`put_varint_u16`],
/// [`finish_frame`] and [`write_header`] it builds a frame in place in a
/// driver's own buffer, as `docs/PROTOCOL.md` lays it out: the header's
/// [`HEADER_LEN`] bytes, the channel and action ids as varints, the content.
pub fn encode_value_onto<T: Serialize + ?Sized, B: BufMut>(
    value: &T,
    out: &mut B,
) -> Result<(), ContentError> {
    bincode::serde::encode_into_writer(value, AppendTo(out), bincode_config()).map_err(|err| {
        ContentError::Encode {
            type_name: std::any::type_name::<T>(),
            reason: err.to_string(),
        }
    })
}

/// bincode's writer for a buffer it appends to: no `io::Write` and no byte
/// count in between, one `put_slice` per field.
struct AppendTo<'a, B>(&'a mut B);

impl<B: BufMut> bincode::enc::write::Writer for AppendTo<'_, B> {
    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) -> Result<(), bincode::error::EncodeError> {
        self.0.put_slice(bytes);
        Ok(())
    }
}

/// Appends a `u16` as bincode's varint: one byte below 251, else 251 and
/// two bytes little-endian (what the envelope's ids are).
pub fn put_varint_u16<B: BufMut>(buf: &mut B, value: u16) {
    if value < 251 {
        buf.put_u8(value as u8);
    } else {
        buf.put_u8(251);
        buf.put_u16_le(value);
    }
}

/// Decodes a serde value that must fill `bytes` exactly.
pub fn decode_value<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ContentError> {
    let (value, used) = decode_value_prefix(bytes)?;
    if used != bytes.len() {
        return Err(ContentError::LeftOver {
            type_name: std::any::type_name::<T>(),
            extra: bytes.len() - used,
        });
    }
    Ok(value)
}

/// Decodes a serde value from the start of `bytes`, returning it and how many
/// bytes it used.
pub fn decode_value_prefix<T: DeserializeOwned>(bytes: &[u8]) -> Result<(T, usize), ContentError> {
    let seed = Bounded(std::marker::PhantomData::<T>);
    bincode::serde::seed_decode_from_slice(seed, bytes, bincode_config()).map_err(|err| {
        ContentError::Decode {
            type_name: std::any::type_name::<T>(),
            reason: err.to_string(),
        }
    })
}

/// The CRC-32 of `bytes` (the zlib polynomial), for files that must detect
/// corruption.
pub fn checksum(bytes: &[u8]) -> u32 {
    let mut crc = flate2::Crc::new();
    crc.update(bytes);
    crc.sum()
}

/// Builds a complete frame (header included) around `payload`, compressing it
/// when that pays. The result is what goes on the wire, ready to be queued for
/// any number of peers.
pub fn encode_frame(payload: &[u8], config: &CodecConfig) -> Result<Bytes, FrameError> {
    if payload.len() >= config.compress_threshold {
        if let Some(frame) = try_compressed_frame(payload, config) {
            return check_outgoing_len(frame, config);
        }
    }
    let mut frame = BytesMut::with_capacity(HEADER_LEN + payload.len());
    put_header(&mut frame, payload.len(), 0);
    frame.put_slice(payload);
    check_outgoing_len(frame.freeze(), config)
}

/// Like [`encode_frame`], for a payload the caller built in a `Vec` that
/// already starts with [`HEADER_LEN`] placeholder bytes. Saves a copy of the
/// payload when it goes uncompressed.
pub fn encode_frame_in_place(mut buf: Vec<u8>, config: &CodecConfig) -> Result<Bytes, FrameError> {
    Ok(finish_frame(&mut buf, config)?.unwrap_or_else(|| Bytes::from(buf)))
}

/// Finishes a frame built in `buf` ([`HEADER_LEN`] placeholder bytes, then
/// the payload): `Some` compressed frame in a buffer of its own when that
/// pays, otherwise `None` with the header written in place. Either way the
/// frame is checked against the limit.
pub fn finish_frame(buf: &mut [u8], config: &CodecConfig) -> Result<Option<Bytes>, FrameError> {
    let payload_len = buf.len() - HEADER_LEN;
    if payload_len >= config.compress_threshold {
        if let Some(frame) = try_compressed_frame(&buf[HEADER_LEN..], config) {
            return check_outgoing_len(frame, config).map(Some);
        }
    }
    if payload_len + 1 > config.max_frame_len {
        return Err(FrameError::TooLarge {
            len: payload_len + 1,
            max: config.max_frame_len,
        });
    }
    write_header(&mut buf[..HEADER_LEN], payload_len, 0);
    Ok(None)
}

fn check_outgoing_len(frame: Bytes, config: &CodecConfig) -> Result<Bytes, FrameError> {
    let len = frame.len() - 4;
    if len > config.max_frame_len {
        return Err(FrameError::TooLarge {
            len,
            max: config.max_frame_len,
        });
    }
    Ok(frame)
}

fn put_header(buf: &mut BytesMut, payload_len: usize, flags: u8) {
    buf.put_u32((payload_len + 1) as u32);
    buf.put_u8(flags);
}

/// Writes a frame's header (the length of the flag byte and `body_len`
/// bytes of body, then `flags`) into the first [`HEADER_LEN`] bytes of
/// `header`: for a frame whose body was written after a placeholder.
pub fn write_header(header: &mut [u8], body_len: usize, flags: u8) {
    header[..4].copy_from_slice(&((body_len + 1) as u32).to_be_bytes());
    header[4] = flags;
}

/// The streaming frame decoder (the driver wraps it for
/// `tokio_util::codec::FramedRead`).
///
/// Feed it bytes in any split; it yields a [`Frame`] once one is complete and
/// never buffers more than `HEADER_LEN + max_frame_len` bytes for one frame.
#[derive(Debug, Clone, Default)]
pub struct FrameDecoder {
    config: CodecConfig,
}

impl FrameDecoder {
    /// A decoder enforcing the limits in `config`.
    pub fn new(config: CodecConfig) -> Self {
        Self { config }
    }

    /// The limits this decoder enforces.
    pub fn config(&self) -> &CodecConfig {
        &self.config
    }

    /// Changes the limits for the frames still to come.
    pub fn config_mut(&mut self) -> &mut CodecConfig {
        &mut self.config
    }
}

impl FrameDecoder {
    /// The length, header included, of a complete uncompressed frame at the
    /// start of `src`, without taking it: the reader's fast path, which
    /// slices a whole read's frames out of one buffer. `None` when the next
    /// frame is incomplete, compressed or bad: [`decode`](Self::decode) then
    /// takes it (or says what is wrong with it).
    pub fn peek_raw(&self, src: &[u8]) -> Option<usize> {
        let header: [u8; HEADER_LEN] = src.get(..HEADER_LEN)?.try_into().ok()?;
        let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let ok = len > 0 && len <= self.config.max_frame_len && header[4] == 0;
        (ok && src.len() >= 4 + len).then_some(4 + len)
    }
}

impl FrameDecoder {
    /// The next frame at the start of `src`, taken out of it; `None` while
    /// it is incomplete ("not enough bytes yet" is a normal state). Room for
    /// the rest of a frame is reserved in `src`, never more than the limit.
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        if src.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([src[0], src[1], src[2], src[3]]) as usize;
        if len == 0 {
            return Err(FrameError::Empty);
        }
        if len > self.config.max_frame_len {
            return Err(FrameError::TooLarge {
                len,
                max: self.config.max_frame_len,
            });
        }
        if src.len() >= HEADER_LEN {
            let flags = src[4];
            if flags & !FLAG_COMPRESSED != 0 {
                return Err(FrameError::UnknownFlags(flags));
            }
        }
        if src.len() < 4 + len {
            // Safe to reserve: `len` was checked against the limit above.
            src.reserve(4 + len - src.len());
            return Ok(None);
        }
        let mut frame = src.split_to(4 + len);
        frame.advance(4);
        let flags = frame.get_u8();
        let body = frame.freeze();
        if flags & FLAG_COMPRESSED == 0 {
            return Ok(Some(Frame {
                compressed: false,
                payload: body,
            }));
        }
        let payload = inflate(&body, self.config.max_decompressed_len)?;
        Ok(Some(Frame {
            compressed: true,
            payload: Bytes::from(payload),
        }))
    }

    /// Like [`decode`](Self::decode) when the stream has ended: bytes left
    /// over that do not make a frame are an error.
    pub fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => Err(FrameError::Truncated {
                buffered: src.len(),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
