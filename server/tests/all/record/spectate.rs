//! A game's recording served live to spectators, paced and stepped.

use super::*;

/// The spectator here is a WebSocket client (what a browser game is).
#[test]
fn replay_served_live_shows_a_websocket_spectator_what_the_followed_player_saw() {
    let path = recording("spectate");
    play_recorded(&path);
    let (at, serving) = serve_spectated(&path, "bob", 20.0);
    let addr = format!("ws://{}/", at.websocket.expect("a WebSocket listener"));
    // The replay starts at the spectator's hello: every event is read here,
    // from the first (a helper that polled for the welcome or a verdict
    // would take the replayed lines that arrive meanwhile).
    let mut spectator = NetworkClient::connect(addr, ClientConfig::named("watcher"));
    let mut lines = Vec::new();
    let mut ticket = None;
    let deadline = Instant::now() + WAIT;
    loop {
        let verdict = ticket.map(|t| spectator.status(t));
        if verdict.as_ref().is_some_and(|v| v.is_done()) && lines.iter().any(|l| l == "psst") {
            // Nothing can change in a replay.
            assert_eq!(
                verdict.unwrap(),
                RequestStatus::Rejected("this is a replay: watch only".into())
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the whisper to bob or the verdict never came: {lines:?}, {verdict:?}"
        );
        for event in spectator.drain_timeout(Duration::from_millis(20)) {
            if let switchboard::ClientEvent::Message(m) = event {
                if let Ok(Board::Line(line)) = m.typed() {
                    lines.push(line.text);
                }
            }
        }
        if ticket.is_none() && spectator.is_welcomed() {
            ticket = Some(spectator.request(Board::Say("hi".into())).unwrap());
        }
    }
    // Bob heard ann's hello and her whisper; the replay ran to its end.
    assert!(lines.contains(&"hello".to_string()), "{lines:?}");
    let inputs = serving.join().unwrap().unwrap();
    assert!(inputs > 20, "{inputs} inputs");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn replay_served_live_seeks_back_and_the_spectator_sees_it_again() {
    use switchboard::record::Replayer;
    use switchboard::spectate::{spectate_with, SpectateCommand, SpectateConfig};
    let path = recording("seek");
    play_recorded(&path);
    let (tx, rx) = std::sync::mpsc::channel();
    let (commands, control) = tokio::sync::mpsc::unbounded_channel();
    let serving = {
        let path = path.clone();
        std::thread::spawn(move || {
            let config = SpectateConfig {
                follow: Some("bob".into()),
                ..SpectateConfig::default()
            };
            let open = || {
                Ok(Replayer::new(
                    open(&path),
                    |_| BoardLogic::new(4),
                    Instant::now(),
                ))
            };
            spectate_with(open, config, |at| tx.send(at.addr).unwrap(), control)
                .map(|report| report.inputs)
        })
    };
    let addr = rx.recv_timeout(WAIT).unwrap();
    let mut spectator = NetworkClient::connect(addr, ClientConfig::named("watcher"));
    let mut lines = Vec::new();
    let mut sought = false;
    let deadline = Instant::now() + WAIT;
    // Bob hears "hello" and "psst"; then the replay goes back to its start
    // and he hears them again, paced as recorded.
    while lines.len() < 4 {
        assert!(Instant::now() < deadline, "lines: {lines:?}");
        for event in spectator.drain_timeout(Duration::from_millis(10)) {
            if let switchboard::ClientEvent::Message(m) = event {
                if let Ok(Board::Line(line)) = m.typed() {
                    lines.push(line.text);
                }
            }
        }
        if !sought && lines.iter().any(|l| l == "psst") {
            commands.send(SpectateCommand::Seek(0)).unwrap();
            sought = true;
        }
    }
    assert_eq!(lines, ["hello", "psst", "hello", "psst"]);
    // It still checks every output, and runs to its end.
    let inputs = serving.join().unwrap().unwrap();
    assert!(inputs > 20, "{inputs} inputs");
    let _ = std::fs::remove_file(&path);
}
