//! Replays the `axispy_bridge` fuzz target's corpus (`fuzz/corpus/axispy_bridge`)
//! through the same body the fuzzer runs: AxisPy messages into a live
//! listener. See `fuzz/README.md` to fuzz further.

#[path = "../../../fuzz/bodies/axispy_bridge.rs"]
mod body;

#[test]
fn fuzz_corpus_of_axispy_bridge_replays_without_a_panic() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/axispy_bridge");
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        body::run(&std::fs::read(&path).unwrap());
        inputs += 1;
    }
    assert!(inputs > 0, "the corpus of axispy_bridge is empty");
}
