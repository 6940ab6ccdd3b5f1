//! A folder for one test's files, removed when the test ends (passed or
//! not): saves and scenarios of the processes a test starts.

use std::ops::Deref;
use std::path::Path;

/// A fresh folder under the system's temporary folder, named after `tag`;
/// gone when dropped.
pub struct Scratch(tempfile::TempDir);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix(&format!("strategy-{tag}-"))
            .tempdir()
            .expect("a temporary folder");
        Scratch(dir)
    }
}

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}
