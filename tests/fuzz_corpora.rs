//! Replays the corpora of this crate's fuzz targets (`fuzz/corpus/NAME`,
//! kept small with `cargo fuzz cmin`) through the same bodies the fuzzer
//! runs, so CI keeps every input the fuzzer found interesting green. One
//! test binary for the four (each binary costs CI a link). See
//! `fuzz/README.md` to fuzz further.

#[path = "../fuzz/bodies/connection_reader.rs"]
mod connection_reader;
#[path = "../fuzz/bodies/frame_decoder.rs"]
mod frame_decoder;
#[path = "../fuzz/bodies/record_reader.rs"]
mod record_reader;
#[path = "../fuzz/bodies/session.rs"]
mod session;

/// Runs every input of `fuzz/corpus/NAME` through `run`.
fn replay_corpus(name: &str, run: impl Fn(&[u8])) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fuzz/corpus/{name}"));
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        run(&std::fs::read(&path).unwrap());
        inputs += 1;
    }
    assert!(inputs > 0, "the corpus of {name} is empty");
}

#[test]
fn fuzz_corpus_of_connection_reader_replays_without_a_panic() {
    replay_corpus("connection_reader", connection_reader::run);
}

#[test]
fn fuzz_corpus_of_frame_decoder_replays_without_a_panic() {
    replay_corpus("frame_decoder", frame_decoder::run);
}

#[test]
fn fuzz_corpus_of_record_reader_replays_without_a_panic() {
    replay_corpus("record_reader", record_reader::run);
}

#[test]
fn fuzz_corpus_of_session_replays_without_a_panic() {
    replay_corpus("session", session::run);
}
