//! Replays the `master_datagram` fuzz target's corpus (`fuzz/corpus/master_datagram`, kept
//! small with `cargo fuzz cmin`) through the same body the fuzzer runs, so
//! CI keeps every input the fuzzer found interesting green. See
//! `fuzz/README.md` to fuzz further.

#[path = "../../../../fuzz/bodies/master_datagram.rs"]
mod body;
#[path = "../../../../fuzz/corpus.rs"]
mod corpus;

#[test]
fn fuzz_corpus_of_master_datagram_replays_without_a_panic() {
    let corpora = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    corpus::replay(&corpora, "master_datagram", body::run);
}
