//! Replays the corpus of the AxisPy fuzz target (`fuzz/corpus/axispy_bridge`,
//! kept small with `cargo fuzz cmin`) through the body the fuzzer runs, so
//! CI keeps every input the fuzzer found interesting green. See
//! `fuzz/README.md` to fuzz further.

#[path = "../../../../fuzz/bodies/axispy_bridge.rs"]
mod axispy_bridge;
#[path = "../../../../fuzz/corpus.rs"]
mod corpus;

/// Where the corpora are.
fn corpora() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

#[test]
fn fuzz_corpus_of_axispy_bridge_replays_without_a_panic() {
    corpus::replay(&corpora(), "axispy_bridge", axispy_bridge::run);
}
