//! The strategy game recorded over real sockets (a lobby, several turns, a
//! dropped player who comes back, a save and a load) replays identically
//! (`docs/RECORDING.md`).

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::Proxy;
use strategy::protocol::{GameAct, LobbyAct, Msg, NationView};
use strategy::rules::StrategyLogic;
use strategy::scenario::{builtin, NationId};
use switchboard::manager::RecordConfig;
use switchboard::record::{replay, RecordReader};
use switchboard::{ClientConfig, ClientEvent, ManagerConfig, NetworkClient, RequestStatus};
use switchboard::{ReconnectPolicy, ServerManager};

const WAIT: Duration = Duration::from_secs(10);

struct Player {
    client: NetworkClient,
    view: Option<NationView>,
}

impl Player {
    fn join(addr: std::net::SocketAddr, name: &str) -> Player {
        let config = ClientConfig {
            reconnect: ReconnectPolicy {
                initial_delay: Duration::from_millis(50),
                ..ReconnectPolicy::default()
            },
            ..ClientConfig::named(name)
        };
        let mut player = Player {
            client: NetworkClient::connect(addr, config),
            view: None,
        };
        player.until(|p| p.client.is_welcomed() && p.view.is_some());
        player
    }

    fn frame(&mut self) {
        for event in self.client.drain_timeout(Duration::from_millis(2)) {
            if let ClientEvent::Message(m) = event {
                if let Ok(Msg::Game(GameAct::View(view))) = m.typed() {
                    self.view = Some(view);
                }
            }
        }
    }

    fn until(&mut self, mut done: impl FnMut(&Player) -> bool) {
        let deadline = Instant::now() + WAIT;
        while !done(self) {
            assert!(Instant::now() < deadline, "not in time");
            self.frame();
        }
    }

    fn ask(&mut self, order: impl Into<Msg>) -> RequestStatus {
        let ticket = self.client.request(order.into()).unwrap();
        let status = self.client.wait(ticket, WAIT);
        self.frame();
        status
    }

    fn turn(&self) -> u32 {
        self.view.as_ref().map_or(0, |v| v.turn)
    }
}

fn logic(saves: &std::path::Path) -> StrategyLogic {
    StrategyLogic::new(builtin("valley").unwrap(), true, saves.to_path_buf())
}

#[test]
fn record_the_strategy_game_with_turns_a_reconnect_a_save_and_a_load_and_replay_it() {
    play_and_replay(false);
}

/// The same game, recorded from its fourth turn on (`start_recording`):
/// the replay starts from the snapshot (the map, both nations, the
/// claimed unit, the turn) and bob's reconnect, the save and the load
/// replay as they went.
#[test]
fn record_the_strategy_game_started_mid_game_and_replay_it_from_its_snapshot() {
    play_and_replay(true);
}

fn play_and_replay(midway: bool) {
    let tag = format!("{}-{midway}", std::process::id());
    let path = std::env::temp_dir().join(format!("switchboard-strategy-{tag}.swrec"));
    let saves: PathBuf = std::env::temp_dir().join(format!("switchboard-strategy-saves-{tag}"));
    std::fs::create_dir_all(&saves).unwrap();
    let config = ManagerConfig {
        record: (!midway).then(|| RecordConfig {
            initial_state: Some(b"valley".to_vec()),
            ..RecordConfig::to(&path)
        }),
        ..ManagerConfig::default()
    };
    let server = ServerManager::builder(logic(&saves))
        .config(config)
        .spawn()
        .unwrap();
    let proxy = Proxy::start(server.local_addr());
    let mut ann = Player::join(server.local_addr(), "ann");
    let mut bob = Player::join(proxy.addr, "bob");

    assert_eq!(
        ann.ask(LobbyAct::Pick(NationId(0))),
        RequestStatus::Accepted
    );
    assert_eq!(
        bob.ask(LobbyAct::Pick(NationId(1))),
        RequestStatus::Accepted
    );
    assert_eq!(ann.ask(LobbyAct::Ready(true)), RequestStatus::Accepted);
    assert_eq!(bob.ask(LobbyAct::Ready(true)), RequestStatus::Accepted);
    assert_eq!(ann.ask(LobbyAct::Start), RequestStatus::Accepted);
    bob.until(|p| p.view.as_ref().is_some_and(|v| v.you == Some(NationId(1))));

    let infantry = ann.view.as_ref().unwrap().unit_at(1, 3).unwrap().id;
    assert_eq!(ann.ask(GameAct::Claim(infantry)), RequestStatus::Accepted);
    for _ in 0..3 {
        let turn = ann.turn();
        assert_eq!(ann.ask(GameAct::EndTurn), RequestStatus::Accepted);
        assert_eq!(bob.ask(GameAct::EndTurn), RequestStatus::Accepted);
        ann.until(|p| p.turn() > turn);
    }
    if midway {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(server.handle().start_recording(RecordConfig::to(&path)))
            .unwrap();
    }

    // Bob's line drops; he comes back with his id and his nation.
    let id = bob.client.client_id();
    proxy.cut();
    bob.until(|p| !p.client.is_welcomed());
    bob.until(|p| p.client.is_welcomed());
    assert_eq!(bob.client.client_id(), id);

    assert_eq!(
        ann.ask(GameAct::Save("slot-r".into())),
        RequestStatus::Accepted
    );
    let turn = ann.turn();
    assert_eq!(ann.ask(GameAct::EndTurn), RequestStatus::Accepted);
    assert_eq!(bob.ask(GameAct::EndTurn), RequestStatus::Accepted);
    ann.until(|p| p.turn() > turn);
    assert_eq!(
        ann.ask(GameAct::Load("slot-r".into())),
        RequestStatus::Accepted
    );
    ann.until(|p| p.turn() == turn);
    server.shutdown_blocking().unwrap();

    let reader =
        RecordReader::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
    let named = (!midway).then_some(&b"valley"[..]);
    assert_eq!(reader.header().initial_state.as_deref(), named);
    let report = match replay(reader, |_| logic(&saves), Instant::now()) {
        Ok(report) => report,
        Err(err) => panic!("{err}"),
    };
    // From the snapshot: the cut, the reconnect and its hello, the save, two
    // ends of turn, the load (and the clock's ticks).
    assert!(report.inputs >= 7, "{} inputs", report.inputs);
    assert_eq!(
        report.logic.view(None).turn,
        turn,
        "the replay loaded the save too"
    );
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&saves);
}
