//! The read buffer's sizing.

use super::*;

#[test]
fn read_buffer_shrinks_back_after_a_large_frame() {
    let mut buffer = bytes::BytesMut::with_capacity(1024 * 1024 + 5);
    buffer.extend_from_slice(&[7u8; 100]);
    shrink_read_buffer(&mut buffer);
    assert_eq!(buffer.capacity(), BUSY_READ_BUFFER);
    assert_eq!(&buffer[..], &[7u8; 100][..], "what was buffered is kept");
    // A buffer still full of a big frame's bytes is left alone.
    let mut full = bytes::BytesMut::with_capacity(1024 * 1024);
    full.extend_from_slice(&vec![1u8; 512 * 1024]);
    shrink_read_buffer(&mut full);
    assert!(full.capacity() >= 512 * 1024);
}

#[test]
fn a_busy_connection_reads_into_one_big_buffer_until_it_is_used_up() {
    let mut buffer = bytes::BytesMut::with_capacity(IDLE_READ_BUFFER);
    buffer.extend_from_slice(&[1u8; 200]);
    grow_read_buffer(&mut buffer);
    assert_eq!(buffer.capacity(), BUSY_READ_BUFFER);
    let first = buffer.as_ptr();
    // Reads of 600 bytes, each split off as a batch (kept alive, as the
    // owner would): the same allocation serves them all.
    let mut batches = Vec::new();
    let mut swaps = 0;
    for _ in 0..200 {
        if buffer.capacity() - buffer.len() < MIN_READ_ROOM {
            buffer.reserve(IDLE_READ_BUFFER);
        }
        let before = buffer.as_ptr();
        let len = buffer.len();
        buffer.extend_from_slice(&[2u8; 600]);
        batches.push(buffer.split_to(len + 600).freeze());
        grow_read_buffer(&mut buffer);
        swaps += usize::from(buffer.as_ptr() != before.wrapping_add(len + 600));
    }
    // 200 reads of 600 bytes fill two 64 KiB buffers and part of a third.
    assert!(swaps <= 3, "{swaps} new buffers for 200 reads");
    assert_eq!(batches[0].as_ptr(), first);
}
