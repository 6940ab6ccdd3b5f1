//! The game's binary as a child process in a test: killed and reaped when
//! dropped, its stdout read line by line.

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::Child;
use std::sync::mpsc;

/// A child process, killed (SIGKILL) and reaped when dropped.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `child`'s stdout (taken; it must be piped), line by line as it comes.
/// Read to the end even when nobody listens any more: the process must
/// never find its stdout closed.
pub fn stdout_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = BufReader::new(child.stdout.take().expect("a piped stdout"));
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    lines
}
