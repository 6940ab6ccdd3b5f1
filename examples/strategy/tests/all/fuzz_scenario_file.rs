//! Replays the `scenario_file` fuzz target's corpus (`fuzz/corpus/scenario_file`, kept
//! small with `cargo fuzz cmin`) through the same body the fuzzer runs, so
//! CI keeps every input the fuzzer found interesting green. See
//! `fuzz/README.md` to fuzz further.

#[path = "../../../../fuzz/bodies/scenario_file.rs"]
mod body;
#[path = "../../../../fuzz/corpus.rs"]
mod corpus;

#[test]
fn fuzz_corpus_of_scenario_file_replays_without_a_panic() {
    let corpora = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    corpus::replay(&corpora, "scenario_file", body::run);
}
