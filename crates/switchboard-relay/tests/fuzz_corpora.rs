//! Replays the corpora of this crate's fuzz targets (`fuzz/corpus/NAME`,
//! kept small with `cargo fuzz cmin`) through the same bodies the fuzzer
//! runs, so CI keeps every input the fuzzer found interesting green. One
//! test binary for them (each binary costs CI a link). See
//! `fuzz/README.md` to fuzz further.

#[path = "../../../fuzz/bodies/compact_frames.rs"]
mod compact_frames;
#[path = "../../../fuzz/bodies/relay_transform.rs"]
mod relay_transform;

/// Runs every input of `fuzz/corpus/NAME` through `run`.
fn replay_corpus(name: &str, run: impl Fn(&[u8])) {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../fuzz/corpus/{name}"));
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        run(&std::fs::read(&path).unwrap());
        inputs += 1;
    }
    assert!(inputs > 0, "the corpus of {name} is empty");
}

#[test]
fn fuzz_corpus_of_compact_frames_replays_without_a_panic() {
    replay_corpus("compact_frames", compact_frames::run);
}

#[test]
fn fuzz_corpus_of_relay_transform_replays_without_a_panic() {
    replay_corpus("relay_transform", relay_transform::run);
}
