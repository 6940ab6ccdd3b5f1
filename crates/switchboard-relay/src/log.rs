//! The relay's own log for its operator: joins, names, leaves, kicks,
//! drops and notices, the latest [`RelayLog::CAPACITY`] lines (the admin
//! page's log tail). `tracing` still gets its own lines.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One line of the relay's log.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayLogLine {
    /// Seconds since the relay started.
    pub at_seconds: f64,
    /// `info` or `warn`.
    pub level: &'static str,
    /// The text; strings a player chose are escaped.
    pub text: String,
}

/// The latest lines, shared by the relay's task and its handles.
#[derive(Debug, Clone)]
pub(crate) struct RelayLog {
    lines: Arc<Mutex<VecDeque<RelayLogLine>>>,
    started: Instant,
}

impl RelayLog {
    /// Lines kept; older ones are forgotten.
    pub(crate) const CAPACITY: usize = 500;
    /// Bytes of one line kept at most (longer ones are cut): the log holds
    /// at most `CAPACITY` times this, whatever players send.
    pub(crate) const MAX_LINE_BYTES: usize = 512;

    pub(crate) fn new() -> Self {
        Self {
            lines: Arc::new(Mutex::new(VecDeque::with_capacity(64))),
            started: Instant::now(),
        }
    }

    pub(crate) fn info(&self, text: String) {
        self.push("info", text);
    }

    pub(crate) fn warn(&self, text: String) {
        self.push("warn", text);
    }

    fn push(&self, level: &'static str, mut text: String) {
        if text.len() > Self::MAX_LINE_BYTES {
            let mut cut = Self::MAX_LINE_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        let line = RelayLogLine {
            at_seconds: self.started.elapsed().as_secs_f64(),
            level,
            text,
        };
        let mut lines = self.lines.lock().expect("relay log lock");
        if lines.len() == Self::CAPACITY {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The lines, oldest first.
    pub(crate) fn lines(&self) -> Vec<RelayLogLine> {
        self.lines
            .lock()
            .expect("relay log lock")
            .iter()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_flood_keeps_only_the_latest_lines() {
        let log = RelayLog::new();
        for i in 0..RelayLog::CAPACITY + 10 {
            log.info(format!("line {i}"));
        }
        let lines = log.lines();
        assert_eq!(lines.len(), RelayLog::CAPACITY);
        assert_eq!(lines[0].text, "line 10");
    }
}
