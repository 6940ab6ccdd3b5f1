//! Replays the corpora of this crate's fuzz targets (`fuzz/corpus/NAME`,
//! kept small with `cargo fuzz cmin`) through the same bodies the fuzzer
//! runs, so CI keeps every input the fuzzer found interesting green. One
//! test binary for the six (each binary costs CI a link). See
//! `fuzz/README.md` to fuzz further.

#[path = "../../fuzz/bodies/connection_reader.rs"]
mod connection_reader;
#[path = "../../fuzz/corpus.rs"]
mod corpus;
#[path = "../../fuzz/bodies/frame_decoder.rs"]
mod frame_decoder;
#[path = "../../fuzz/bodies/quic_datagrams.rs"]
mod quic_datagrams;
#[path = "../../fuzz/bodies/record_reader.rs"]
mod record_reader;
#[path = "../../fuzz/bodies/session.rs"]
mod session;
#[path = "../../fuzz/bodies/tls_listener.rs"]
mod tls_listener;

/// Where the corpora are.
fn corpora() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")
}

#[test]
fn fuzz_corpus_of_connection_reader_replays_without_a_panic() {
    corpus::replay(&corpora(), "connection_reader", connection_reader::run);
}

#[test]
fn fuzz_corpus_of_frame_decoder_replays_without_a_panic() {
    corpus::replay(&corpora(), "frame_decoder", frame_decoder::run);
}

#[test]
fn fuzz_corpus_of_quic_datagrams_replays_without_a_panic() {
    corpus::replay(&corpora(), "quic_datagrams", quic_datagrams::run);
}

#[test]
fn fuzz_corpus_of_record_reader_replays_without_a_panic() {
    corpus::replay(&corpora(), "record_reader", record_reader::run);
}

#[test]
fn fuzz_corpus_of_tls_listener_replays_without_a_panic() {
    corpus::replay(&corpora(), "tls_listener", tls_listener::run);
}

#[test]
fn fuzz_corpus_of_session_replays_without_a_panic() {
    corpus::replay(&corpora(), "session", session::run);
}
