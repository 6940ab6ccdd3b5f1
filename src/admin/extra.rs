//! [`WithCounters`]: a mode's [`AdminSource`] with more counters, those
//! the process that runs it adds (its calls to Redis, for one).

use crate::admin::source::{AdminSource, BoxFuture, Counter, LogLine, Snapshot};

/// A function that reports counters now.
type More = Box<dyn Fn() -> Vec<Counter> + Send + Sync>;

/// `source`, with `more()`'s counters added to each snapshot; everything
/// else is `source`'s.
pub struct WithCounters<S> {
    source: S,
    more: More,
}

impl<S> std::fmt::Debug for WithCounters<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithCounters").finish_non_exhaustive()
    }
}

impl<S: AdminSource> WithCounters<S> {
    /// `source`'s view, with `more`'s counters after its own.
    pub fn new(source: S, more: impl Fn() -> Vec<Counter> + Send + Sync + 'static) -> Self {
        Self {
            source,
            more: Box::new(more),
        }
    }
}

impl<S: AdminSource> AdminSource for WithCounters<S> {
    fn mode(&self) -> &'static str {
        self.source.mode()
    }

    fn snapshot(&self) -> BoxFuture<'_, Snapshot> {
        Box::pin(async move {
            let mut snapshot = self.source.snapshot().await;
            snapshot.counters.extend((self.more)());
            snapshot
        })
    }

    fn kick(&self, id: String, reason: String) -> BoxFuture<'_, bool> {
        self.source.kick(id, reason)
    }

    fn notice(&self, text: String) -> BoxFuture<'_, Result<usize, String>> {
        self.source.notice(text)
    }

    fn spawn_bots(
        &self,
        count: usize,
        script: String,
        place: Option<String>,
    ) -> BoxFuture<'_, Result<usize, String>> {
        self.source.spawn_bots(count, script, place)
    }

    fn remove_bots(&self) -> BoxFuture<'_, usize> {
        self.source.remove_bots()
    }

    fn log(&self) -> Vec<LogLine> {
        self.source.log()
    }

    fn recording(&self) -> Option<crate::manager::RecordingStatus> {
        self.source.recording()
    }

    fn stop_recording(&self) -> bool {
        self.source.stop_recording()
    }

    fn start_recording(&self) -> BoxFuture<'_, Result<String, String>> {
        self.source.start_recording()
    }
}
