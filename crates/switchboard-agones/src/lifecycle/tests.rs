use super::*;

/// A GameServer in `state` declaring these Lists and Counters.
fn server(state: &str, lists: &[&str], counters: &[&str]) -> GameServer {
    let mut status = agones::Status {
        state: state.into(),
        ..Default::default()
    };
    for list in lists {
        status.lists.insert(list.to_string(), Default::default());
    }
    for counter in counters {
        status
            .counters
            .insert(counter.to_string(), Default::default());
    }
    GameServer {
        object_meta: Some(agones::ObjectMeta::default()),
        spec: None,
        status: Some(status),
    }
}

fn report(players: &[&str]) -> Report {
    Report {
        players: players.iter().map(|p| p.to_string()).collect(),
        ..Report::default()
    }
}

fn config(empty: Option<u64>) -> AgonesConfig {
    AgonesConfig {
        empty_shutdown_after: empty.map(Duration::from_secs),
        ..AgonesConfig::default()
    }
}

#[test]
fn no_health_when_the_server_does_not_answer_its_probe() {
    let mut life = Lifecycle::new(&config(None), &server("Ready", &[], &[]));
    let now = Instant::now();
    assert_eq!(life.on_tick(now, None), Vec::<Action>::new());
    assert_eq!(
        life.on_tick(now, Some(&report(&[]))),
        vec![Action::Health, Action::SetLabel(PLAYERS, "0".into())]
    );
    assert_eq!(life.on_tick(now, Some(&report(&[]))), vec![Action::Health]);
    assert_eq!(life.on_tick(now, None), Vec::<Action>::new());
}

#[test]
fn players_go_into_the_players_list_as_they_join_and_leave() {
    let mut life = Lifecycle::new(&config(None), &server("Allocated", &[PLAYERS], &[]));
    let now = Instant::now();
    assert_eq!(
        life.on_tick(now, Some(&report(&["1", "2"]))),
        vec![
            Action::Health,
            Action::AddPlayer("1".into()),
            Action::AddPlayer("2".into())
        ]
    );
    assert_eq!(
        life.on_tick(now, Some(&report(&["2", "3"]))),
        vec![
            Action::Health,
            Action::RemovePlayer("1".into()),
            Action::AddPlayer("3".into())
        ]
    );
    assert_eq!(
        life.on_tick(now, Some(&report(&["2", "3"]))),
        vec![Action::Health]
    );
}

#[test]
fn players_already_in_the_list_are_not_added_twice_after_a_restart() {
    let mut record = server("Allocated", &[PLAYERS], &[]);
    let status = record.status.as_mut().unwrap();
    status.lists.get_mut(PLAYERS).unwrap().values = vec!["1".into(), "9".into()];
    let mut life = Lifecycle::new(&config(None), &record);
    assert_eq!(
        life.on_tick(Instant::now(), Some(&report(&["1"]))),
        vec![Action::Health, Action::RemovePlayer("9".into())]
    );
}

#[test]
fn players_are_counted_in_a_counter_or_a_label_when_there_is_no_list() {
    let mut counted = Lifecycle::new(&config(None), &server("Allocated", &[], &[PLAYERS]));
    let now = Instant::now();
    assert_eq!(
        counted.on_tick(now, Some(&report(&["1", "2"]))),
        vec![Action::Health, Action::SetCounter(PLAYERS, 2)]
    );
    let mut labelled = Lifecycle::new(&config(None), &server("Allocated", &[], &[]));
    assert_eq!(
        labelled.on_tick(now, Some(&report(&["1"]))),
        vec![Action::Health, Action::SetLabel(PLAYERS, "1".into())]
    );
    assert_eq!(
        labelled.on_tick(now, Some(&report(&["7"]))),
        vec![Action::Health]
    );
}

#[test]
fn rooms_and_their_capacity_go_into_the_rooms_counter() {
    let mut life = Lifecycle::new(&config(None), &server("Ready", &[PLAYERS], &[ROOMS]));
    let rooms = Report {
        rooms: Some(3),
        rooms_capacity: Some(100),
        ..Report::default()
    };
    assert_eq!(
        life.on_tick(Instant::now(), Some(&rooms)),
        vec![
            Action::Health,
            Action::SetCounterCapacity(ROOMS, 100),
            Action::SetCounter(ROOMS, 3)
        ]
    );
    assert_eq!(
        life.on_tick(Instant::now(), Some(&rooms)),
        vec![Action::Health]
    );
}

#[test]
fn a_first_player_on_a_ready_server_allocates_it() {
    let mut life = Lifecycle::new(&config(None), &server("Ready", &[PLAYERS], &[]));
    assert!(!life.is_allocated());
    let actions = life.on_tick(Instant::now(), Some(&report(&["1"])));
    assert_eq!(actions[..2], [Action::Health, Action::Allocate]);
    assert!(life.is_allocated());
    let again = life.on_tick(Instant::now(), Some(&report(&["1", "2"])));
    assert!(!again.contains(&Action::Allocate));
}

#[test]
fn an_allocation_is_read_from_labels_and_annotations_once() {
    let mut life = Lifecycle::new(&config(None), &server("Ready", &[], &[]));
    let mut allocated = server("Allocated", &[], &[]);
    let meta = allocated.object_meta.as_mut().unwrap();
    meta.labels.insert(SCENARIO_KEY.into(), "plains".into());
    meta.labels.insert(PLAYERS_KEY.into(), "2".into());
    meta.annotations
        .insert(SCENARIO_KEY.into(), "islands".into());
    meta.annotations.insert(GAME_KEY.into(), "cup-final".into());
    let now = Instant::now();
    assert_eq!(life.on_game_server(now, &server("Ready", &[], &[])), None);
    let allocation = life.on_game_server(now, &allocated).expect("allocated");
    assert_eq!(allocation.scenario.as_deref(), Some("islands"));
    assert_eq!(allocation.game.as_deref(), Some("cup-final"));
    assert_eq!(allocation.players, Some(2));
    assert_eq!(life.on_game_server(now, &allocated), None, "once");
}

#[test]
fn shutdown_when_the_game_ended() {
    let mut life = Lifecycle::new(&config(None), &server("Allocated", &[PLAYERS], &[]));
    let ended = Report {
        ended: true,
        ..report(&["1"])
    };
    let actions = life.on_tick(Instant::now(), Some(&ended));
    assert_eq!(actions.last(), Some(&Action::Shutdown));
    assert!(life.is_shut_down());
    assert_eq!(
        life.on_tick(Instant::now(), Some(&ended)),
        Vec::<Action>::new()
    );
}

#[test]
fn shutdown_after_staying_empty_for_the_configured_time_once_the_match_began() {
    let start = Instant::now();
    let at = |secs| start + Duration::from_secs(secs);
    let mut life = Lifecycle::new(&config(Some(30)), &server("Ready", &[PLAYERS], &[]));
    // Ready and empty for ever: no match yet, no shutdown.
    assert!(!life
        .on_tick(at(100), Some(&report(&[])))
        .contains(&Action::Shutdown));
    // The match begins with a player, who leaves at 110.
    life.on_tick(at(101), Some(&report(&["1"])));
    assert!(!life
        .on_tick(at(110), Some(&report(&[])))
        .contains(&Action::Shutdown));
    // Someone comes back before the 30 s: the clock starts again.
    assert!(!life
        .on_tick(at(139), Some(&report(&["2"])))
        .contains(&Action::Shutdown));
    assert!(!life
        .on_tick(at(140), Some(&report(&[])))
        .contains(&Action::Shutdown));
    assert!(!life
        .on_tick(at(169), Some(&report(&[])))
        .contains(&Action::Shutdown));
    assert_eq!(
        life.on_tick(at(170), Some(&report(&[]))).last(),
        Some(&Action::Shutdown)
    );
}

#[test]
fn an_allocated_server_nobody_joins_shuts_down_after_the_empty_time() {
    let start = Instant::now();
    let mut life = Lifecycle::new(&config(Some(30)), &server("Ready", &[], &[]));
    life.on_game_server(start, &server("Allocated", &[], &[]));
    life.on_tick(start, Some(&report(&[])));
    let later = start + Duration::from_secs(30);
    assert_eq!(
        life.on_tick(later, Some(&report(&[]))).last(),
        Some(&Action::Shutdown)
    );
}

#[test]
fn without_an_empty_time_only_the_game_s_end_shuts_down() {
    let start = Instant::now();
    let mut life = Lifecycle::new(&config(None), &server("Allocated", &[], &[]));
    life.on_tick(start, Some(&report(&["1"])));
    let much_later = start + Duration::from_secs(86_400);
    assert!(!life
        .on_tick(much_later, Some(&report(&[])))
        .contains(&Action::Shutdown));
}

#[test]
fn players_known_only_by_count_are_counted_and_begin_the_match() {
    let mut life = Lifecycle::new(&config(Some(10)), &server("Ready", &[], &[PLAYERS]));
    let start = Instant::now();
    let counted = |n| Report {
        player_count: Some(n),
        ..Report::default()
    };
    assert_eq!(
        life.on_tick(start, Some(&counted(3))),
        vec![
            Action::Health,
            Action::Allocate,
            Action::SetCounter(PLAYERS, 3)
        ]
    );
    life.on_tick(start, Some(&counted(0)));
    let later = start + Duration::from_secs(10);
    assert_eq!(
        life.on_tick(later, Some(&counted(0))).last(),
        Some(&Action::Shutdown)
    );
}

#[test]
fn a_process_restarted_during_its_match_is_told_its_allocation_and_does_not_allocate_again() {
    let mut record = server("Allocated", &[PLAYERS], &[]);
    let meta = record.object_meta.as_mut().unwrap();
    meta.annotations
        .insert(SCENARIO_KEY.into(), "islands".into());
    let mut life = Lifecycle::new(&config(Some(30)), &record);
    assert!(life.is_allocated());
    let now = Instant::now();
    let told = life.on_game_server(now, &record).expect("told at once");
    assert_eq!(told.scenario.as_deref(), Some("islands"));
    let actions = life.on_tick(now, Some(&report(&["1"])));
    assert!(!actions.contains(&Action::Allocate), "{actions:?}");
}
