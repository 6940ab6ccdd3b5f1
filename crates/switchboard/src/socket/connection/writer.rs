//! The writer half of a connection: the outbound queue to the socket, small
//! frames coalesced, the close frame last.

use super::*;

pub(super) async fn write_loop<W: AsyncWrite + Unpin>(
    writer: &mut Writer<W>,
    handle: &SocketHandle,
    clock: &Clock,
) -> WriteEnd {
    let config = handle.config();
    let counters = &handle.shared.counters;
    let mut batch = VecDeque::new();
    // Allocated on first use: an idle connection never pays for it.
    let mut chunk = Vec::new();
    // Every frame this task writes is stamped on the clock: only real
    // writes put the next keep-alive ping off (senders' direct writes are
    // in the queue's `last_direct`).
    let sent = || clock.sent.store(clock.stamp(), Ordering::Relaxed);
    // Frames and bytes written since the queue's accounting last saw them.
    let mut written = (0usize, 0usize);
    // Frames and bytes in `batch`.
    let mut taken;
    loop {
        // Take the socket back from direct senders, and everything queued,
        // in one lock.
        let (close, close_now, pong, ping) = {
            let mut out = handle.outbound();
            out.writer_idle = false;
            // What the last batch wrote leaves the accounting here, in the
            // same lock.
            out.frames -= std::mem::take(&mut written.0);
            out.bytes -= std::mem::take(&mut written.1);
            taken = out.take_all(&mut batch);
            let close = if batch.is_empty() {
                out.close.take()
            } else {
                None
            };
            let ping = std::mem::take(&mut out.ping);
            (close, out.close_now.take(), out.pong.take(), ping)
        };
        // Orders that jump the queue: closes that cannot wait, pongs, pings.
        if let Some((code, reason)) = close_now {
            return Box::pin(close_with(writer, code, &reason, handle)).await;
        }
        if let Some(stamp) = pong {
            let pong = control::pong_frame(stamp, &config.codec);
            if let Err(err) = Box::pin(write_frame(writer, counters, pong)).await {
                return WriteEnd::Failed(err);
            }
            sent();
        }
        if ping {
            let ping = control::ping_frame(clock.stamp(), &config.codec);
            if let Err(err) = Box::pin(write_frame(writer, counters, ping)).await {
                return WriteEnd::Failed(err);
            }
            sent();
        }
        if let Some((code, reason)) = close {
            return Box::pin(close_with(writer, code, &reason, handle)).await;
        }
        if batch.is_empty() {
            // Before paying for a system call, give senders on this runtime
            // one turn to add to the queue: bursts then leave in one write.
            tokio::task::yield_now().await;
            if !handle.outbound().is_empty() {
                continue;
            }
            if let Err(err) = writer.flush().await {
                return WriteEnd::Failed(err);
            }
            {
                // Everything is written: lend the socket to senders, who may
                // now write a frame themselves instead of waking this task.
                let mut out = handle.outbound();
                if !out.is_empty() || out.has_orders() {
                    continue;
                }
                out.writer_idle = true;
            }
            // Senders, orders (pongs, pings, closes) and closes wake us.
            handle.shared.wake.notified().await;
            continue;
        }
        let (frames, bytes) = taken;
        if let Err(err) = write_batch(writer, &mut batch, &mut chunk).await {
            return WriteEnd::Failed(err);
        }
        sent();
        counters.wrote(frames, bytes);
        written = (frames, bytes);
    }
}

/// Small segments are copied into one buffer of up to this many bytes and
/// written together; larger ones are written as they are.
const CHUNK: usize = 64 * 1024;
/// A segment at least this long is written as it is, not copied.
const WRITE_AS_IS: usize = 8 * 1024;

/// Writes a batch of segments, coalescing small ones into `chunk`.
async fn write_batch<W: AsyncWrite + Unpin>(
    writer: &mut Writer<W>,
    batch: &mut VecDeque<Segment>,
    chunk: &mut Vec<u8>,
) -> std::io::Result<()> {
    for segment in batch.drain(..) {
        let bytes = segment.bytes;
        if !chunk.is_empty() && (chunk.len() + bytes.len() > CHUNK || bytes.len() >= WRITE_AS_IS) {
            writer.write_all(chunk).await?;
            chunk.clear();
        }
        if bytes.len() >= WRITE_AS_IS {
            writer.write_all(&bytes).await?;
        } else {
            chunk.extend_from_slice(&bytes);
        }
    }
    if !chunk.is_empty() {
        writer.write_all(chunk).await?;
        chunk.clear();
    }
    Ok(())
}

async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut Writer<W>,
    counters: &Counters,
    frame: Bytes,
) -> std::io::Result<usize> {
    writer.write_all(&frame).await?;
    counters.wrote(1, frame.len());
    Ok(frame.len())
}

async fn close_with<W: AsyncWrite + Unpin>(
    writer: &mut Writer<W>,
    code: CloseCode,
    reason: &str,
    handle: &SocketHandle,
) -> WriteEnd {
    {
        let mut slot = handle.shared.kill_reason.lock().expect("kill_reason lock");
        slot.get_or_insert_with(|| DisconnectReason::Closed {
            code,
            reason: reason.to_string(),
        });
    }
    let frame = control::close_frame(code, reason, &handle.config().codec);
    let result = async {
        writer.write_all(&frame).await?;
        writer.flush().await?;
        writer.shutdown().await
    }
    .await;
    match result {
        Ok(()) => WriteEnd::SentClose,
        Err(err) => WriteEnd::Failed(err),
    }
}
