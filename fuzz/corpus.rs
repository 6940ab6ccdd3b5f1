//! The corpus replay every crate's fuzz tests share (each includes this file
//! with `#[path]`): every input the fuzzer kept in `fuzz/corpus/NAME`, run
//! through the same body the fuzz target runs, so CI keeps them green.

/// Runs every input of `corpora/NAME` through `run`; an empty or missing
/// corpus fails.
pub fn replay(corpora: &std::path::Path, name: &str, run: impl Fn(&[u8])) {
    let dir = corpora.join(name);
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        run(&std::fs::read(&path).unwrap());
        inputs += 1;
    }
    assert!(inputs > 0, "the corpus of {name} is empty");
}
