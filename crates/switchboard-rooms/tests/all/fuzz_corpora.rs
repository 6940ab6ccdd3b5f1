//! Replays the corpus of the rooms fuzz target (`fuzz/corpus/rooms_requests`,
//! kept small with `cargo fuzz cmin`) through the same body the fuzzer
//! runs, so CI keeps every input the fuzzer found interesting green. See
//! `fuzz/README.md` to fuzz further.

#[path = "../../../../fuzz/corpus.rs"]
mod corpus;
#[path = "../../../../fuzz/bodies/rooms_requests.rs"]
mod rooms_requests;

/// Where the corpora are.
fn corpora() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

#[test]
fn fuzz_corpus_of_rooms_requests_replays_without_a_panic() {
    corpus::replay(&corpora(), "rooms_requests", rooms_requests::run);
}
