//! The game's own executable re-invoked as its server: `ServerProgram::CurrentExe`
//! with `serve_if_child` at the top of "main" (here, of a test function that
//! only the child runs).

use std::time::{Duration, Instant};

use switchboard::{ClientConfig, LocalServer, LocalServerOptions, NetworkClient, RequestStatus};
use switchboard_server::board::{Board, BoardLogic};

/// The child's entry point: in the child (SWITCHBOARD_CHILD set) it becomes
/// the server and never returns; run directly, it does nothing.
#[test]
#[ignore = "entry point of the child server process"]
fn child_server_entry() {
    switchboard::process::serve_if_child(BoardLogic::default);
}

#[test]
fn own_executable_serves_as_the_local_server() {
    let options = LocalServerOptions {
        args: [
            "--exact",
            "own_exe::child_server_entry",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ]
        .map(String::from)
        .to_vec(),
        ..LocalServerOptions::default()
    };
    let server = LocalServer::spawn(options).unwrap();
    let exe = std::fs::read_link(format!("/proc/{}/exe", server.pid())).unwrap();
    assert_eq!(
        exe,
        std::env::current_exe().unwrap(),
        "the child runs this very executable"
    );

    let mut client = NetworkClient::connect(server.addr(), ClientConfig::named("solo"));
    let ticket = client.request(Board::Claim(1u8)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !client.status(ticket).is_done() {
        assert!(Instant::now() < deadline);
        client.poll_timeout(Duration::from_millis(10));
    }
    assert_eq!(client.status(ticket), RequestStatus::Accepted);
    let pid = server.pid();
    assert!(server.shutdown().unwrap().success());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the child was waited for and is gone"
    );
}
