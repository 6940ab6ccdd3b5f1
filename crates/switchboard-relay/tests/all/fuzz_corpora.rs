//! Replays the corpora of this crate's fuzz targets (`fuzz/corpus/NAME`,
//! kept small with `cargo fuzz cmin`) through the same bodies the fuzzer
//! runs, so CI keeps every input the fuzzer found interesting green. One
//! test binary for them (each binary costs CI a link). See
//! `fuzz/README.md` to fuzz further.

#[path = "../../../../fuzz/bodies/compact_frames.rs"]
mod compact_frames;
use crate::corpus;
#[path = "../../../../fuzz/bodies/relay_transform.rs"]
mod relay_transform;

/// Where the corpora are.
fn corpora() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

#[test]
fn fuzz_corpus_of_compact_frames_replays_without_a_panic() {
    corpus::replay(&corpora(), "compact_frames", compact_frames::run);
}

#[test]
fn fuzz_corpus_of_relay_transform_replays_without_a_panic() {
    corpus::replay(&corpora(), "relay_transform", relay_transform::run);
}
