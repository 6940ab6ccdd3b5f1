//! The relay's recording: over real sockets, replayed, and served to a
//! spectator.

use super::*;

/// The relay recorded while bots walk and talk through it over real
/// sockets (`relay --record`, `bots`), stopped with SIGTERM, then replayed
/// by `switchboard-server replay`: every answer of its core the same.
#[test]
fn record_the_relay_over_real_sockets_and_replay_it_identically() {
    let path = recording("relay");
    let args: Vec<String> = ["relay", "--port", "0", "--view-radius", "50", "--record"]
        .iter()
        .map(|s| s.to_string())
        .chain([path.display().to_string()])
        .collect();
    let (mut relay, lines) = support::start_lines(&args);
    let port = support::ready_port(&lines);
    let bots = Command::new(support::BIN)
        .args(["bots", "--addr", &format!("127.0.0.1:{port}")])
        .args(["--count", "12", "--rate", "10", "--seconds", "2", "--walk"])
        .args(["--view-radius", "50", "--world", "120", "--json"])
        .output()
        .unwrap();
    assert!(
        bots.status.success(),
        "{}",
        String::from_utf8_lossy(&bots.stderr)
    );
    support::signal(&relay, libc::SIGTERM);
    assert!(relay.wait().unwrap().success());
    let said = replay_on_the_command_line(&path);
    assert!(said.contains("every answer identical"), "{said}");
    let calls: u64 = said
        .split("replayed ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    // 12 joins and about 12 × 10 × 2 transforms.
    assert!(calls > 200, "{said}");
    watch_the_relay_recording(&path);
    let _ = std::fs::remove_file(&path);
}

/// `replay FILE --serve PORT --serve-ws PORT` on a relay's recording: a
/// relay client over WebSocket (what a browser game is) connects and is
/// welcomed as the first recorded bot, hears the others
/// walking near it, is told it may only watch, and the replay, checked as
/// it goes, ends with every answer identical. At the recorded pace: the
/// whole recording is about four seconds, and at four times its speed a
/// loaded machine could end the replay before the spectator had taken its
/// welcome (seen once in 3 runs of the suite).
fn watch_the_relay_recording(path: &Path) {
    use switchboard::socket::{SocketConfig, SocketEvent, SocketStream};
    use switchboard_relay::{RelayAction, RelayChannel, Relayed, Transform};
    let args: Vec<String> = ["replay".to_string(), path.display().to_string()]
        .into_iter()
        .chain(["--serve", "0", "--serve-ws", "0", "--speed", "1"].map(String::from))
        .collect();
    let (mut served, lines) = support::start_lines(&args);
    support::ready_port(&lines);
    let ws = support::line_starting(&lines, "WebSocket spectators: ");
    let url = ws.trim_start_matches("WebSocket spectators: ").to_string();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (welcomed, heard, refused) = rt.block_on(async {
        let mut spectator = SocketStream::connect_ws(&url, SocketConfig::default());
        let (mut welcomed, mut heard, mut refused) = (None, 0, None);
        let deadline = tokio::time::Instant::now() + WAIT;
        while refused.is_none() || heard < 5 {
            let event = tokio::time::timeout_at(deadline, spectator.next_event())
                .await
                .expect("the spectator heard too little in time");
            match event {
                Some(SocketEvent::Received(m)) => match m.action::<RelayAction>() {
                    Some(RelayAction::Welcome) => {
                        welcomed = m.content::<u32>().ok();
                        // What a spectator sends changes nothing.
                        let moved = Transform {
                            zone: "z".into(),
                            ..Transform::default()
                        };
                        let order = switchboard::Message::new(
                            RelayChannel,
                            RelayAction::Transform,
                            &moved,
                        )
                        .unwrap();
                        spectator.send(&order).unwrap();
                    }
                    Some(RelayAction::Relayed) => {
                        let relayed: Relayed = m.content().unwrap();
                        assert_ne!(Some(relayed.player_id), welcomed, "not its own transforms");
                        heard += 1;
                    }
                    Some(RelayAction::Error) => refused = m.content::<String>().ok(),
                    _ => {}
                },
                Some(_) => {}
                None => panic!("the replay ended before the spectator heard enough: {welcomed:?} {heard} {refused:?}"),
            }
        }
        (welcomed, heard, refused)
    });
    assert!(welcomed.is_some(), "welcomed as a recorded player");
    assert!(heard >= 5, "{heard} transforms heard");
    assert_eq!(refused.as_deref(), Some("this is a replay: watch only"));
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = served.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the served replay never ended");
        std::thread::sleep(Duration::from_millis(20));
    };
    let said: Vec<String> = lines.try_iter().collect();
    assert!(status.success(), "{said:?}");
    assert!(
        said.iter().any(|l| l.contains("every answer identical")),
        "{said:?}"
    );
}
