//! [`Recorder`]: the one writer of a recording file, off the server's path,
//! for the manager's sessions (`ManagerConfig::record`) and the relay's
//! calls (`RelayHandle::start_recording`).
//!
//! ```text
//!  server's path ──send(item)──▶ bounded queue ──(a batch, or a second)──▶ writer thread
//!                                                                           │ record(item), zlib
//!                                                                           ▼
//!                                          file: header, [snapshot], records…, End | Stopped(why)
//! ```
//!
//! The server hands over cheap items (a message is a shared buffer); the
//! writer's thread turns them into records ([`Recording::record`]),
//! compresses and writes them, and flushes what it has when a second
//! passes without a batch, so that a server that dies leaves its recording
//! up to its last second. When the queue is full the recording stops, says
//! why in the log and in the file, and the server goes on.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use flate2::write::ZlibEncoder;
use serde::Serialize;

use crate::manager::RecordingStatus;
use crate::record::write_record;

/// What one kind of recording holds: the items its server hands over, and
/// the records its file holds.
pub trait Recording: Send + 'static {
    /// What the server hands over on its path: cheap to make.
    type Item: Send + 'static;
    /// What the file holds, one per item.
    type Record: Serialize;
    /// Which server records ("game", "relay"): in the reason a full queue
    /// gives, and the writer thread's name.
    const SERVER: &'static str;
    /// An item as the file holds it (on the writer's thread).
    fn record(item: Self::Item) -> Self::Record;
    /// The file's last record: its end, or why it stopped early.
    fn last(stopped: Option<String>) -> Self::Record;
}

/// Items handed to the writer at once (one wake-up of its thread), unless
/// a second passes first.
const BATCH: usize = 256;

/// A recording being written to a file by a thread of its own. Dropping it
/// ends the file and waits for it.
pub struct Recorder<R: Recording> {
    path: PathBuf,
    shared: Arc<Shared<R>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct Shared<R: Recording> {
    queue: Mutex<Queue<R>>,
    /// Wakes the writer: a batch is ready, or the recording ended.
    ready: Condvar,
    /// The file ends with its last record and is flushed.
    complete: AtomicBool,
}

struct Queue<R: Recording> {
    items: Vec<R::Item>,
    /// Items waiting at most.
    max: usize,
    /// Still taking items.
    open: bool,
    /// Why it stopped early, if it did.
    stopped: Option<String>,
}

impl<R: Recording> std::fmt::Debug for Recorder<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("server", &R::SERVER)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl<R: Recording> Recorder<R> {
    /// Creates the file at `path`, writes `header` and `first` (the
    /// snapshot a recording started mid-game begins with), and starts the
    /// writer, which holds at most `queue` items waiting for the disk.
    pub fn create(
        path: impl Into<PathBuf>,
        header: &impl Serialize,
        first: Option<R::Record>,
        queue: usize,
    ) -> std::io::Result<Self> {
        let path = path.into();
        let file = std::fs::File::create(&path)?;
        let mut out = ZlibEncoder::new(BufWriter::new(file), flate2::Compression::fast());
        write_record(&mut out, header)?;
        if let Some(first) = first {
            write_record(&mut out, &first)?;
        }
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                items: Vec::new(),
                max: queue.max(1),
                open: true,
                stopped: None,
            }),
            ready: Condvar::new(),
            complete: AtomicBool::new(false),
        });
        let writing = shared.clone();
        let shown = path.display().to_string();
        let writer = std::thread::Builder::new()
            .name(format!("{}-recorder", R::SERVER))
            .spawn(move || {
                if let Err(err) = write_all(&writing, out) {
                    tracing::warn!(path = %shown, %err, "the recording could not be written");
                }
            })?;
        Ok(Self {
            path,
            shared,
            writer: Mutex::new(Some(writer)),
        })
    }

    fn queue(&self) -> MutexGuard<'_, Queue<R>> {
        self.shared
            .queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `item` for the file; `false` if the recording has stopped.
    /// A full queue stops it (the disk is slower than the server): the
    /// reason goes to the log and the file.
    pub fn send(&self, item: R::Item) -> bool {
        let mut queue = self.queue();
        if !queue.open {
            return false;
        }
        if queue.items.len() >= queue.max {
            let why = format!(
                "its queue was full: the disk is slower than the {}",
                R::SERVER
            );
            tracing::warn!("{} recording stopped: {why}", R::SERVER);
            queue.stopped = Some(why);
            queue.open = false;
            self.shared.ready.notify_one();
            return false;
        }
        queue.items.push(item);
        if queue.items.len() % BATCH == 0 {
            self.shared.ready.notify_one();
        }
        true
    }

    /// Stops recording (the file ends with `Stopped(why)`); the server goes
    /// on. `false` if it had stopped already.
    pub fn stop(&self, why: &str) -> bool {
        let mut queue = self.queue();
        if !queue.open {
            return false;
        }
        queue.stopped = Some(why.to_string());
        queue.open = false;
        self.shared.ready.notify_one();
        true
    }

    /// Ends the recording (the file ends with `End`, unless it stopped
    /// early) and waits on this thread until the file is complete.
    pub fn finish(&self) {
        {
            let mut queue = self.queue();
            queue.open = false;
            self.shared.ready.notify_one();
        }
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }

    /// Where it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Why it stopped early, if it did.
    pub fn stopped(&self) -> Option<String> {
        self.queue().stopped.clone()
    }

    /// Where it stands, for the admin page.
    pub fn status(&self) -> RecordingStatus {
        let queue = self.queue();
        RecordingStatus {
            path: self.path.clone(),
            recording: queue.open,
            complete: self.shared.complete.load(Ordering::Acquire),
            stopped: queue.stopped.clone(),
        }
    }
}

impl<R: Recording> Drop for Recorder<R> {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The writer thread: each batch of items as records; what it has flushed
/// when a second passes without one; then the last record, and the end of
/// the stream.
fn write_all<R: Recording>(
    shared: &Shared<R>,
    mut out: ZlibEncoder<BufWriter<std::fs::File>>,
) -> std::io::Result<()> {
    let stopped = loop {
        let (items, open, stopped) = {
            let mut queue = shared
                .queue
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if queue.open && queue.items.len() < BATCH {
                queue = shared
                    .ready
                    .wait_timeout(queue, Duration::from_secs(1))
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
            }
            (
                std::mem::take(&mut queue.items),
                queue.open,
                queue.stopped.clone(),
            )
        };
        let quiet = items.len() < BATCH;
        for item in items {
            write_record(&mut out, &R::record(item))?;
        }
        if !open {
            break stopped;
        }
        if quiet {
            out.flush()?;
        }
    };
    write_record(&mut out, &R::last(stopped))?;
    out.finish()?.flush()?;
    shared.complete.store(true, Ordering::Release);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Numbers, ended by `u64::MAX` (or the length of why it stopped).
    struct Numbers;

    impl Recording for Numbers {
        type Item = u64;
        type Record = u64;
        const SERVER: &'static str = "test";
        fn record(item: u64) -> u64 {
            item * 10
        }
        fn last(stopped: Option<String>) -> u64 {
            stopped.map_or(u64::MAX, |why| why.len() as u64)
        }
    }

    /// The records of the file at `path` (those complete so far).
    fn read(path: &Path) -> Vec<u64> {
        let mut bytes = Vec::new();
        let file = std::fs::File::open(path).unwrap();
        // A file still being written ends early: what came before counts.
        let _ = flate2::read::ZlibDecoder::new(file).read_to_end(&mut bytes);
        let mut out = Vec::new();
        let mut rest = &bytes[..];
        while rest.len() >= 4 {
            let len = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
            if rest.len() < 4 + len {
                break;
            }
            out.push(crate::codec::decode_value::<u64>(&rest[4..4 + len]).unwrap());
            rest = &rest[4 + len..];
        }
        out
    }

    fn scratch(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!(
            "switchboard-recorder-{}-{name}",
            std::process::id()
        ))
    }

    #[test]
    fn every_item_reaches_the_file_in_order_then_its_end() {
        let path = scratch("order");
        let recorder = Recorder::<Numbers>::create(&path, &7u64, Some(8), 10_000).unwrap();
        for n in 0..1000 {
            assert!(recorder.send(n));
        }
        recorder.finish();
        let mut expected = vec![7, 8];
        expected.extend((0..1000).map(|n| n * 10));
        expected.push(u64::MAX);
        assert_eq!(read(&path), expected);
        let status = recorder.status();
        assert!(status.complete && !status.recording && status.stopped.is_none());
        assert!(!recorder.send(1), "nothing is taken after the end");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_quiet_recording_reaches_the_disk_within_about_a_second() {
        let path = scratch("quiet");
        let recorder = Recorder::<Numbers>::create(&path, &1u64, None, 100).unwrap();
        recorder.send(5);
        // The writer flushes what it has when a second passes without a
        // batch: the file holds the item before the recording ends.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let flushed = loop {
            if read(&path) == [1, 50] {
                break true;
            }
            if std::time::Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(flushed, "the item never reached the file");
        drop(recorder);
        assert_eq!(read(&path), vec![1, 50, u64::MAX]);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_full_queue_stops_the_recording_with_its_reason_and_the_server_goes_on() {
        let path = scratch("full");
        let recorder = Recorder::<Numbers>::create(&path, &0u64, None, 3).unwrap();
        // The writer may take items at any time: send until the queue
        // refuses one (it holds three at most).
        let mut sent = 0;
        while recorder.send(1) {
            sent += 1;
            assert!(sent < 1_000_000, "the queue never filled");
        }
        let why = recorder.stopped().expect("a reason");
        assert!(why.contains("slower than the test"), "{why}");
        recorder.finish();
        let records = read(&path);
        assert_eq!(records.len(), 1 + sent + 1);
        assert_eq!(*records.last().unwrap(), why.len() as u64);
        let _ = std::fs::remove_file(path);
    }
}
