//! Replays the corpora of this crate's fuzz targets (`fuzz/corpus/NAME`,
//! kept small with `cargo fuzz cmin`) through the same bodies the fuzzer
//! runs, so CI keeps every input the fuzzer found interesting green. One
//! test binary for them (each binary costs CI a link). See
//! `fuzz/README.md` to fuzz further.

#[path = "../../../../fuzz/bodies/axispy_bridge.rs"]
mod axispy_bridge;
#[path = "../../../../fuzz/corpus.rs"]
mod corpus;
#[path = "../../../../fuzz/bodies/rooms_requests.rs"]
mod rooms_requests;

/// Where the corpora are.
fn corpora() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

#[test]
fn fuzz_corpus_of_axispy_bridge_replays_without_a_panic() {
    corpus::replay(&corpora(), "axispy_bridge", axispy_bridge::run);
}

#[test]
fn fuzz_corpus_of_rooms_requests_replays_without_a_panic() {
    corpus::replay(&corpora(), "rooms_requests", rooms_requests::run);
}
