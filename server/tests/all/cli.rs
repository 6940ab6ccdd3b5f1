//! The command line, mode by mode: the options every mode shares read the
//! same, secrets from the environment never show in `--help`, an option
//! given where it does not belong is an error, and a tool that failed to
//! do its job says so with its exit status.

use std::process::Command;

use crate::support;
use support::BIN;
/// The modes that serve, then the load testers.
const MODES: [&[&str]; 7] = [
    &[],
    &["master"],
    &["relay"],
    &["rooms"],
    &["matchmaker"],
    &["bots"],
    &["requests"],
];
const SERVERS: usize = 5;

fn help(mode: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(mode)
        .arg("--help")
        .env("SWITCHBOARD_REDIS", "redis://:hunter2@127.0.0.1:6379/")
        .env("SWITCHBOARD_ADMIN_TOKEN", "s3cret-s3cret-s3cret")
        .output()
        .unwrap();
    assert!(out.status.success(), "{mode:?} --help");
    String::from_utf8(out.stdout).unwrap()
}

/// The lines of `option`'s entry in a help text.
fn entry(help: &str, option: &str) -> Option<String> {
    let mut lines = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(option));
    let first = lines.next()?;
    let rest: Vec<&str> = lines
        .take_while(|l| !l.trim_start().starts_with("--") && !l.trim_start().starts_with("-h"))
        .collect();
    // The same words, however clap lays them out (short or long help).
    let text = format!("{first} {}", rest.join(" "));
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[test]
fn every_mode_binds_loopback_by_default_and_shares_its_options_word_for_word() {
    let helps: Vec<String> = MODES.iter().map(|mode| help(mode)).collect();
    for option in [
        "--bind ",
        "--admin-port ",
        "--admin-bind ",
        "--admin-token-file ",
        "--json ",
        "--seconds ",
    ] {
        let entries: Vec<(usize, String)> = helps
            .iter()
            .enumerate()
            .filter_map(|(i, h)| Some((i, entry(h, option)?)))
            .collect();
        assert!(entries.len() >= 2, "{option} in {} modes", entries.len());
        for (i, text) in &entries {
            assert_eq!(text, &entries[0].1, "{option} in {:?} differs", MODES[*i]);
        }
    }
    for (i, (mode, help)) in MODES.iter().zip(&helps).enumerate() {
        if i < SERVERS {
            let bind = entry(help, "--bind ").unwrap_or_else(|| panic!("{mode:?} has --bind"));
            assert!(bind.contains("[default: loopback]"), "{mode:?}: {bind}");
        }
        assert!(!help.contains("hunter2"), "{mode:?} shows a Redis password");
        assert!(!help.contains("s3cret"), "{mode:?} shows the admin token");
    }
}

#[test]
fn an_option_given_before_a_subcommand_is_an_error_not_ignored() {
    let out = Command::new(BIN)
        .args(["--admin-port", "0", "relay", "--port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn a_version_is_printed_by_every_mode() {
    for mode in MODES {
        let out = Command::new(BIN).args(mode).arg("-V").output().unwrap();
        assert!(out.status.success(), "{mode:?} -V");
        assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));
    }
}

#[test]
fn load_testers_against_nothing_exit_with_a_failure() {
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    for tool in ["bots", "requests"] {
        let out = Command::new(BIN)
            .args([tool, "--addr", &addr, "--count", "2", "--seconds", "0.5"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{tool} against nothing succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&addr), "{tool}: {err}");
    }
}

#[test]
fn the_request_load_tester_reports_as_json() {
    let (_server, port) = support::start(&["--port", "0"]);
    let out = Command::new(BIN)
        .args(["requests", "--addr", &format!("127.0.0.1:{port}")])
        .args(["--count", "3", "--rate", "5", "--seconds", "0.5", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(report["clients"], 3);
    assert_eq!(report["welcomed"], 3);
    assert!(report["accepted"].as_u64().unwrap() > 0, "{report}");
    // Each accepted request reaches all three clients.
    assert!(
        report["deliveries"].as_u64().unwrap() >= report["accepted"].as_u64().unwrap(),
        "{report}"
    );
}

#[test]
fn the_masters_old_per_ip_option_is_still_read_under_its_per_address_name() {
    let parses = |option: &str| {
        Command::new(BIN)
            .args(["master", option, "4", "--help"])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(parses("--max-per-address"));
    assert!(parses("--max-per-ip"), "the old name is an alias");
    assert!(!parses("--max-per-gremlin"), "an unknown option is refused");
    assert!(entry(&help(&["master"]), "--max-per-address").is_some());
}
