//! Recording the relay's core and replaying it: identical answers, a
//! changed rule found at the right record, a cut or corrupted file a clear
//! error.

use std::sync::Arc;

#[path = "../../../../fuzz/bodies/relay_record_reader.rs"]
mod body;
use crate::corpus;

use switchboard::record::{read_value, write_record};
use switchboard_relay::interest::InterestConfig;
use switchboard_relay::record::{self, RelayHeader, RelayInput, RelayRecord, RelayRecorder};
use switchboard_relay::{Link, Relay, RelayLimits, Transform};

fn at(x: f32, z: f32, zone: &str) -> Transform {
    Transform {
        position: [x, 0.0, z],
        zone: zone.into(),
        ..Transform::default()
    }
}

/// A session on a relay with interest by distance: joins, walks, a zone
/// change, a player over its rate, a leave. Recorded to `path` from the
/// start, or from a snapshot taken at step `from` of the walk.
fn session(path: &std::path::Path, limits: RelayLimits, from: Option<u64>) {
    let mut relay = Relay::with_limits(limits).with_interest(InterestConfig::default());
    let record = |relay: &mut Relay, snapshot: Option<Vec<u8>>| {
        let header = relay.record_header();
        let recorder = RelayRecorder::create_from(path, header, snapshot, 1024).unwrap();
        relay.record_to(Arc::new(recorder));
    };
    if from.is_none() {
        record(&mut relay, None);
    }
    let ids: Vec<u32> = (0..6)
        .map(|i| relay.join(&format!("p{i}"), None, Link::Native, i == 5).0)
        .collect();
    relay.describe(ids[0], "ann", false);
    for step in 0..40u64 {
        if from == Some(step) {
            let snapshot = relay.snapshot().unwrap();
            record(&mut relay, Some(snapshot));
        }
        for (i, &id) in ids.iter().enumerate() {
            let x = i as f32 * 20.0 + step as f32 * 1.5;
            let zone = if i == 2 && step > 20 { "b" } else { "a" };
            relay.transform(id, at(x, 10.0, zone), 1_000 + step * 50);
        }
    }
    // Player 3 floods: past its burst, refused.
    for n in 0..30u64 {
        relay.transform(ids[3], at(60.0, 10.0, "a"), 4_000 + n);
    }
    let _ = relay.take_abusive();
    relay.leave(ids[1]);
    relay.malformed_line();
    // Dropping the relay ends the recording.
}

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "switchboard-relay-{}-{name}.swrl",
        std::process::id()
    ))
}

#[test]
fn record_relay_calls_and_replay_them_identically() {
    let path = temp("same");
    session(&path, RelayLimits::default(), None);
    assert!(record::is_relay_recording(&path));
    let report = record::replay(std::fs::File::open(&path).unwrap()).unwrap();
    assert_eq!(report.divergence, None);
    assert_eq!(report.stopped, None);
    // 6 joins, a describe, 240 + 30 transforms, a take, a leave, a line.
    assert_eq!(report.calls, 6 + 1 + 240 + 30 + 1 + 1 + 1);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn replay_relay_with_a_changed_rule_diverges_at_the_first_call_it_changes() {
    let path = temp("changed");
    session(&path, RelayLimits::default(), None);
    // The same calls under a relay whose burst is 2: player 3's flood is
    // refused earlier than recorded.
    let changed = temp("changed-rule");
    rewrite(
        &path,
        &changed,
        |header| {
            header.limits.transform_burst = 2.0;
            header.limits.transforms_per_second = 1.0;
        },
        |_| true,
    );
    let report = record::replay(std::fs::File::open(&changed).unwrap()).unwrap();
    let divergence = report.divergence.expect("a divergence");
    // Records: 6 joins, the describe, then each player's first transform
    // (admitted under both rules: a burst of 2), then the second round's
    // first one, record 14: the third transform of player 0 at 1,100 ms is
    // the first a burst of 2 and 1 a second refuses.
    assert_eq!(divergence.record, 6 + 1 + 6 + 6 + 1);
    assert!(matches!(
        divergence.input,
        RelayInput::Transform { now_ms: 1_100, .. }
    ));
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&changed).unwrap();
}

/// Copies the recording at `from` to `to`, its header changed by `edit`,
/// keeping the records `keep` keeps.
fn rewrite(
    from: &std::path::Path,
    to: &std::path::Path,
    edit: impl FnOnce(&mut RelayHeader),
    keep: impl Fn(&RelayRecord) -> bool,
) {
    let mut stream = flate2::read::ZlibDecoder::new(std::fs::File::open(from).unwrap());
    let mut header: RelayHeader = read_value(&mut stream, 0).unwrap().unwrap();
    edit(&mut header);
    let file = std::fs::File::create(to).unwrap();
    let mut out = flate2::write::ZlibEncoder::new(file, flate2::Compression::fast());
    write_record(&mut out, &header).unwrap();
    let mut number = 0;
    while let Some(record) = read_value::<RelayRecord>(&mut stream, number + 1).unwrap() {
        number += 1;
        let last = matches!(record, RelayRecord::End);
        if keep(&record) {
            write_record(&mut out, &record).unwrap();
        }
        if last {
            break;
        }
    }
    out.finish().unwrap();
}

#[test]
fn record_relay_started_mid_session_replays_identically_from_its_snapshot() {
    let path = temp("mid");
    // From step 25: after the zone change, with worlds in both zones,
    // views, budgets and strikes to come.
    session(&path, RelayLimits::default(), Some(25));
    let report = record::replay(std::fs::File::open(&path).unwrap()).unwrap();
    assert_eq!(report.divergence, None);
    // 15 rounds of 6 transforms, the flood, a take, a leave, a line.
    assert_eq!(report.calls, 15 * 6 + 30 + 1 + 1 + 1);
    // The same calls without the snapshot answer otherwise at once.
    let bare = temp("mid-bare");
    rewrite(
        &path,
        &bare,
        |_| {},
        |r| !matches!(r, RelayRecord::Snapshot(_)),
    );
    let report = record::replay(std::fs::File::open(&bare).unwrap()).unwrap();
    let divergence = report
        .divergence
        .expect("a divergence without the snapshot");
    assert_eq!(divergence.record, 1, "the first call");
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&bare).unwrap();
}

/// A relay recording served with commands, over real sockets: the
/// spectator is welcomed as the first player and hears those near it; a
/// seek back to the start welcomes it again and it hears them again; the
/// replay, checked as it goes, runs to its end with every answer identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_replay_served_seeks_back_and_the_spectator_watches_it_again() {
    use switchboard::socket::{SocketConfig, SocketEvent, SocketStream};
    use switchboard::spectate::{SpectateCommand, SpectateConfig};
    use switchboard_relay::{RelayAction, Relayed};
    let path = temp("seek");
    session(&path, RelayLimits::default(), None);
    let (commands, control) = tokio::sync::mpsc::unbounded_channel();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let file = path.clone();
    let open = move || std::fs::File::open(&file);
    let config = SpectateConfig {
        speed: 4.0,
        ..SpectateConfig::default()
    };
    let listening = move |at: switchboard::spectate::Listening| {
        let _ = tx.send(at.addr);
    };
    let serving = tokio::spawn(record::watch_with(open, config, listening, Some(control)));
    let mut spectator = SocketStream::connect(rx.await.unwrap(), SocketConfig::default());
    let (mut welcomes, mut heard, mut heard_again) = (0, 0, 0);
    // The recorded clock: as far as it went before the seek, and where it
    // stood again after.
    let (mut before, mut again) = (0, u64::MAX);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while welcomes < 2 || heard_again < 3 {
        let event = tokio::time::timeout_at(deadline, spectator.next_event())
            .await
            .unwrap_or_else(|_| panic!("{welcomes} welcomes, {heard} heard, {heard_again} again"));
        let Some(event) = event else {
            panic!(
                "the replay ended first: {welcomes} welcomes, {heard} heard, {heard_again} again"
            )
        };
        let SocketEvent::Received(m) = event else {
            continue;
        };
        match m.action::<RelayAction>() {
            Some(RelayAction::Welcome) => welcomes += 1,
            Some(RelayAction::Relayed) if welcomes >= 2 => {
                heard_again += 1;
                again = again.min(m.content::<Relayed>().unwrap().server_time_ms);
            }
            Some(RelayAction::Relayed) => {
                heard += 1;
                before = before.max(m.content::<Relayed>().unwrap().server_time_ms);
                if heard == 5 {
                    commands.send(SpectateCommand::Seek(0)).unwrap();
                }
            }
            _ => {}
        }
    }
    assert!(again < before, "back in time: {again} ms after {before} ms");
    let report = serving.await.unwrap().unwrap();
    assert_eq!(report.divergence, None);
    // Counted from the start again after the seek: the whole recording.
    assert_eq!(report.calls, 6 + 1 + 240 + 30 + 1 + 1 + 1);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn replay_relay_of_a_cut_or_corrupted_file_is_a_clear_error() {
    let path = temp("cut");
    session(&path, RelayLimits::default(), None);
    let bytes = std::fs::read(&path).unwrap();
    for cut in [bytes.len() / 2, bytes.len() - 3, 10] {
        let result = record::replay(&bytes[..cut]);
        assert!(result.is_err(), "cut at {cut}: {result:?}");
    }
    let mut corrupted = bytes.clone();
    let middle = corrupted.len() / 2;
    corrupted[middle] ^= 0x5a;
    assert!(record::replay(&corrupted[..]).is_err());
    assert!(record::replay(&b"not a recording"[..]).is_err());
    std::fs::remove_file(&path).unwrap();
}

/// Replays the `relay_record_reader` fuzz target's corpus
/// (`fuzz/corpus/relay_record_reader`, minimized with `cargo fuzz cmin`)
/// through the body the fuzzer runs: every input it found interesting
/// stays a result, never a panic. See `fuzz/README.md`.
#[test]
fn fuzz_corpus_of_relay_record_reader_replays_without_a_panic() {
    let corpora = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    corpus::replay(&corpora, "relay_record_reader", body::run);
}

#[test]
fn a_relay_snapshot_goes_back_only_into_a_fresh_relay_and_damaged_bytes_say_so() {
    use switchboard_relay::RelaySnapshotError;
    let mut relay = Relay::new();
    relay.join("ann", None, Link::Native, false);
    let snapshot = relay.snapshot().unwrap();
    assert_eq!(
        relay.restore(&snapshot),
        Err(RelaySnapshotError::NotFresh),
        "a relay with players takes no snapshot"
    );
    let mut fresh = Relay::new();
    assert!(matches!(
        fresh.restore(&snapshot[..snapshot.len() / 2]),
        Err(RelaySnapshotError::Codec(_))
    ));
    fresh.restore(&snapshot).unwrap();
    assert_eq!(fresh.snapshot().unwrap(), snapshot, "the same core again");
}

/// A running relay asked to record twice says which file it records to;
/// a file that cannot be created says which and why; a stopped relay
/// says it stopped: each a variant a caller can match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_recording_on_a_running_relay_refuses_with_a_typed_reason() {
    use switchboard_relay::{RelayServer, StartRecordingError};
    let relay = RelayServer::builder().spawn().unwrap();
    let first = temp("typed-first");
    relay.start_recording(first.clone()).await.unwrap();
    match relay.start_recording(temp("typed-second")).await {
        Err(StartRecordingError::AlreadyRecording(path)) => assert_eq!(path, first),
        other => panic!("{other:?}"),
    }
    assert!(relay.stop_recording());
    let nowhere = std::path::PathBuf::from("/nonexistent-switchboard-dir/relay.swrl");
    match relay.start_recording(nowhere.clone()).await {
        Err(StartRecordingError::File { path, .. }) => assert_eq!(path, nowhere),
        other => panic!("{other:?}"),
    }
    let handle = relay.handle();
    relay.shutdown().await.unwrap();
    match handle.start_recording(temp("typed-late")).await {
        Err(err @ StartRecordingError::Stopped) => {
            assert_eq!(err.to_string(), "the server has stopped")
        }
        other => panic!("{other:?}"),
    }
    let _ = std::fs::remove_file(first);
}
