//! Replays the `relay_record_reader` fuzz target's corpus (`fuzz/corpus/relay_record_reader`, kept
//! small with `cargo fuzz cmin`) through the same body the fuzzer runs, so
//! CI keeps every input the fuzzer found interesting green. See
//! `fuzz/README.md` to fuzz further.

#[path = "../../../fuzz/bodies/relay_record_reader.rs"]
mod body;

#[test]
fn fuzz_corpus_of_relay_record_reader_replays_without_a_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus/relay_record_reader");
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        body::run(&std::fs::read(&path).unwrap());
        inputs += 1;
    }
    assert!(inputs > 0, "the corpus of relay_record_reader is empty");
}
