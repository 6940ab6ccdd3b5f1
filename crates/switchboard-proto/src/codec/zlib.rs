//! zlib both ways: a frame compressed when that pays, a body inflated
//! within its limit. One deflate and one inflate state per thread.

use std::cell::RefCell;

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::{write_header, CodecConfig, FrameError, FLAG_COMPRESSED, HEADER_LEN};

thread_local! {
    /// One deflate state per thread, reset between frames: a fresh one costs
    /// a few hundred KiB of allocation and zeroing, more than a small frame's
    /// compression itself.
    static DEFLATE: RefCell<Option<(u32, Compress)>> = const { RefCell::new(None) };
    /// One inflate state per thread, reset between frames.
    static INFLATE: RefCell<Option<Decompress>> = const { RefCell::new(None) };
}

/// How much of a payload is compressed first to judge whether the rest is
/// worth it: game payloads that are already dense (random ids, compressed
/// assets) are spotted after this many bytes instead of at the end.
const SAMPLE_LEN: usize = 1024;

/// Compresses into a buffer no larger than the raw frame; if zlib cannot
/// finish inside it, compression did not pay and `None` says "send it raw".
pub(super) fn try_compressed_frame(payload: &[u8], config: &CodecConfig) -> Option<Bytes> {
    let level = config.compression_level.min(9);
    DEFLATE.with(|cell| {
        let mut cell = cell.borrow_mut();
        let zlib = match &mut *cell {
            Some((have, zlib)) if *have == level => {
                zlib.reset();
                zlib
            }
            slot => {
                &mut slot
                    .insert((level, Compress::new(Compression::new(level), true)))
                    .1
            }
        };
        compress_into_frame(zlib, payload)
    })
}

fn compress_into_frame(zlib: &mut Compress, payload: &[u8]) -> Option<Bytes> {
    let limit = HEADER_LEN + payload.len();
    let mut out = Vec::with_capacity(limit);
    out.extend_from_slice(&[0; HEADER_LEN]);
    if payload.len() >= 4 * SAMPLE_LEN {
        // Sync-flush a sample so its output is all out, and give up on
        // payloads that do not shrink by a tenth.
        let status = zlib.compress_vec(&payload[..SAMPLE_LEN], &mut out, FlushCompress::Sync);
        if status.is_err() || (out.len() - HEADER_LEN) * 10 > SAMPLE_LEN * 9 {
            return None;
        }
    }
    let done = zlib.total_in() as usize;
    match zlib.compress_vec(&payload[done..], &mut out, FlushCompress::Finish) {
        Ok(Status::StreamEnd) if out.len() < limit => {
            let body_len = out.len() - HEADER_LEN;
            write_header(&mut out[..HEADER_LEN], body_len, FLAG_COMPRESSED);
            Some(Bytes::from(out))
        }
        _ => None,
    }
}

/// Inflates a zlib body, never producing more than `max` bytes and rejecting
/// anything after the end of the stream.
pub fn inflate(body: &[u8], max: usize) -> Result<Vec<u8>, FrameError> {
    INFLATE.with(|cell| {
        let mut cell = cell.borrow_mut();
        let zlib = match &mut *cell {
            Some(zlib) => {
                zlib.reset(true);
                zlib
            }
            slot => slot.insert(Decompress::new(true)),
        };
        inflate_with(zlib, body, max)
    })
}

fn inflate_with(zlib: &mut Decompress, body: &[u8], max: usize) -> Result<Vec<u8>, FrameError> {
    // Start small and grow: the ratio is unknown and a bomb must not get a
    // large allocation for free. The capacity never passes `max + 1`.
    let cap = max.saturating_add(1);
    let mut out = Vec::with_capacity(body.len().saturating_mul(4).max(64).min(cap));
    loop {
        let before_in = zlib.total_in();
        let before_out = zlib.total_out();
        let consumed = before_in as usize;
        let status = zlib
            .decompress_vec(&body[consumed..], &mut out, FlushDecompress::None)
            .map_err(|err| FrameError::CorruptZlib(err.to_string()))?;
        if out.len() > max {
            return Err(FrameError::DecompressedTooLarge { max });
        }
        match status {
            Status::StreamEnd => {
                let used = zlib.total_in() as usize;
                if used != body.len() {
                    return Err(FrameError::TrailingBytes {
                        count: body.len() - used,
                    });
                }
                return Ok(out);
            }
            Status::Ok | Status::BufError => {
                let progressed = zlib.total_in() != before_in || zlib.total_out() != before_out;
                if out.len() == out.capacity() {
                    let grow = out.capacity().min(cap - out.len());
                    out.reserve_exact(grow);
                } else if !progressed && zlib.total_in() as usize == body.len() {
                    return Err(FrameError::TruncatedZlib);
                } else if !progressed {
                    return Err(FrameError::CorruptZlib("decoder made no progress".into()));
                }
            }
        }
    }
}
