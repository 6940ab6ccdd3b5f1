//! A relay recording served to spectators ([`watch`]): the replay runs on a
//! fresh core, paced by the recorded clock, and every spectator is sent
//! what one recorded player was sent, as if it were that player on a live
//! relay: its welcome, the others in its zone where they stand, then each
//! transform, entry and leave it heard. Spectators connect with any relay
//! client (`RelayAction`'s single messages); what they send is answered
//! "this is a replay: watch only". The replay is checked as it goes: a
//! call whose answer differs from the recorded one ends it, reported. With
//! [`watch_with`] it is paused, played, sped up and stepped back and forth.

use std::io::Read;
use std::time::Duration;

use switchboard::record::{RecordError, ReplayError};
use switchboard::socket::{EndpointEvent, EndpointHandle, PeerId};
use switchboard::spectate::{listen, next_command, Listening, SpectateCommand, SpectateConfig};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

use super::{RelayInput, RelayReplay, RelayReplayer};
use crate::dispatch::plain_frame;
use crate::hub::{Relay, RelayEvent};
use crate::server::{RelayAction, RelayChannel};

/// The spectators and whom they watch.
struct Audience {
    handle: EndpointHandle,
    spectators: Vec<PeerId>,
    followed: Option<u32>,
    /// The recorded relay's clock, as far as the replay has gone.
    clock_ms: Option<u64>,
}

impl Audience {
    fn send(&self, to: &[PeerId], event: &RelayEvent) {
        let codec = &self.handle.config().socket.codec;
        if let Some(frame) = plain_frame(event, codec) {
            for peer in to {
                let _ = self.handle.send_encoded_to(*peer, &frame);
            }
        }
    }

    /// Tells `to` whom it is now, and shows it the others in that
    /// player's zone where they stand.
    fn greet(&self, relay: &Relay, to: &[PeerId]) {
        let Some(id) = self.followed else { return };
        self.send(to, &RelayEvent::Welcome { player_id: id });
        let clients = relay.clients();
        let zone = clients
            .iter()
            .find(|c| c.id == id)
            .and_then(|c| c.zone.clone());
        for other in clients.iter().filter(|c| c.id != id && c.zone == zone) {
            if let Some(last) = &other.last {
                let event = RelayEvent::Transform {
                    player_id: other.id,
                    server_time_ms: self.clock_ms.unwrap_or(0),
                    transform: last.clone(),
                };
                self.send(to, &event);
            }
        }
    }

    /// Picks whom to follow when nobody is (at the start, or after the
    /// followed player left), and greets every spectator as that player.
    fn follow(&mut self, relay: &Relay, name: Option<&str>) {
        let present = |id: u32| relay.player(id).is_some();
        if self.followed.is_some_and(present) {
            return;
        }
        let clients = relay.clients();
        self.followed = match name {
            Some(name) => clients.iter().find(|c| c.name == name).map(|c| c.id),
            None => clients.first().map(|c| c.id),
        };
        let everyone = self.spectators.clone();
        self.greet(relay, &everyone);
    }

    /// A spectator came, went or spoke.
    fn take(&mut self, relay: &Relay, event: EndpointEvent) {
        match event {
            EndpointEvent::PeerConnected { peer, .. } => {
                self.spectators.push(peer);
                self.greet(relay, &[peer]);
            }
            EndpointEvent::PeerDisconnected { peer, .. } => self.spectators.retain(|p| *p != peer),
            EndpointEvent::Received(incoming) => {
                let _ = self.handle.send_value_to(
                    incoming.peer,
                    RelayChannel,
                    RelayAction::Error,
                    "this is a replay: watch only",
                );
            }
            _ => {}
        }
    }
}

/// The relay's clock in a call, where it has one.
fn clock_of(input: &RelayInput) -> Option<u64> {
    match input {
        RelayInput::Transform { now_ms, .. }
        | RelayInput::Admit { now_ms, .. }
        | RelayInput::RelayAdmitted { now_ms, .. } => Some(*now_ms),
        _ => None,
    }
}

/// Serves the relay recording `file` as a game's replay is served
/// (`config`: where, how fast, whom to follow, from which record, whether
/// to wait for the first spectator, WebSocket too), telling `listening`
/// where. Whom to follow is a recorded player's name; by default the
/// player with the lowest id present, and the next one when it leaves.
/// Returns the replay's report (a divergence ends it early, reported
/// there); a file that cannot be read is an error.
pub async fn watch(
    file: impl Read,
    config: SpectateConfig,
    listening: impl FnOnce(Listening),
) -> Result<RelayReplay, ReplayError> {
    let mut once = Some(file);
    let open = move || {
        once.take().ok_or_else(|| {
            std::io::Error::other("this replay cannot go back: serve it with watch_with")
        })
    };
    watch_with(open, config, listening, None).await
}

/// Like [`watch`], taking [`SpectateCommand`]s while it runs: pause, play,
/// speed, and seek to a record (back starts again from the recording's
/// beginning, which `open` gives anew; the records up to the one asked are
/// fed at once, then spectators are shown where the followed player stands:
/// its welcome, the others in its zone where they are).
pub async fn watch_with<R: Read>(
    mut open: impl FnMut() -> std::io::Result<R>,
    config: SpectateConfig,
    listening: impl FnOnce(Listening),
    mut commands: Option<UnboundedReceiver<SpectateCommand>>,
) -> Result<RelayReplay, ReplayError> {
    let reopen = |open: &mut dyn FnMut() -> std::io::Result<R>| {
        RelayReplayer::new(open().map_err(RecordError::Io)?)
    };
    let mut replayer = reopen(&mut open)?;
    let (mut server, at) = listen(&config).map_err(RecordError::Io)?;
    listening(at);
    let mut audience = Audience {
        handle: server.handle(),
        spectators: Vec::new(),
        followed: None,
        clock_ms: None,
    };
    // The replay starts with its first spectator.
    while config.wait_for_spectator && audience.spectators.is_empty() {
        let event = server
            .next_event()
            .await
            .ok_or_else(|| RecordError::Io(std::io::Error::other("the server stopped")))?;
        audience.take(replayer.core(), event);
    }
    let valid = |speed: f64| speed.is_finite() && speed > 0.0;
    let mut speed = if valid(config.speed) {
        config.speed
    } else {
        1.0
    };
    // Stepped to a record before the start: shown where the player stands
    // there.
    let (mut skip_to, mut paused, mut regreet) = (config.skip_to, false, config.skip_to > 0);
    let mut report = RelayReplay {
        calls: 0,
        stopped: None,
        divergence: None,
    };
    'calls: while let Some(call) = replayer.next_step()? {
        report.calls += 1;
        if let Some(now_ms) = clock_of(&call.input) {
            let last = audience.clock_ms.replace(now_ms);
            let wait = Duration::from_millis(last.map_or(0, |last| now_ms.saturating_sub(last)));
            let mut due = Instant::now() + wait.div_f64(speed);
            while call.record >= skip_to && (paused || Instant::now() < due) {
                let held = paused.then(|| Instant::now() + Duration::from_secs(3600));
                tokio::select! {
                    _ = tokio::time::sleep_until(held.unwrap_or(due)) => {}
                    Some(event) = server.next_event() => audience.take(replayer.core(), event),
                    command = next_command(&mut commands) => match command {
                        SpectateCommand::Pause => paused = true,
                        // Goes on from here, the call's wait anew.
                        SpectateCommand::Play if paused => {
                            paused = false;
                            due = Instant::now() + wait.div_f64(speed);
                        }
                        SpectateCommand::Speed(s) if valid(s) => speed = s,
                        SpectateCommand::Seek(record) => {
                            (skip_to, regreet) = (record, true);
                            if record <= call.record {
                                // Back: from the beginning again.
                                replayer = reopen(&mut open)?;
                                (audience.followed, audience.clock_ms) = (None, None);
                                report.calls = 0;
                                continue 'calls;
                            }
                        }
                        _ => {}
                    },
                }
            }
        }
        if let Some(divergence) = call.divergence() {
            report.divergence = Some(divergence);
            break;
        }
        audience.follow(replayer.core(), config.follow.as_deref());
        if call.record < skip_to {
            continue;
        }
        let Some(followed) = audience.followed else {
            continue;
        };
        let everyone = audience.spectators.clone();
        if std::mem::take(&mut regreet) {
            // Where the followed player stands after a seek.
            audience.greet(replayer.core(), &everyone);
        }
        for (to, event) in &call.out {
            let own_welcome = matches!(event, RelayEvent::Welcome { .. });
            if to.contains(&followed) && !own_welcome {
                audience.send(&everyone, event);
            }
        }
    }
    report.stopped = replayer.stopped.take();
    // Every spectator gets what was queued for it, then the reason, before
    // this returns (the process may exit then, and its connections with
    // it): the stream ends once every connection has.
    audience.handle.shutdown("the replay ended");
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while server.next_event().await.is_some() {}
    })
    .await;
    Ok(report)
}
