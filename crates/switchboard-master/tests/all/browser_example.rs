//! The server browser example runs as its docs say: without `--master` it
//! starts a demo master with three game servers, lists, pings and joins one
//! (it once failed at once, unnoticed: its master was dropped too early).

use std::process::Command;

#[test]
fn the_browser_example_lists_pings_and_joins_its_demo_servers() {
    // `cargo test` builds the examples next to the test binaries.
    let exe = std::env::current_exe().unwrap();
    let examples = exe.parent().unwrap().parent().unwrap().join("examples");
    let browser = examples.join(format!("browser{}", std::env::consts::EXE_SUFFIX));
    assert!(
        browser.exists(),
        "{} (built by cargo test)",
        browser.display()
    );
    let out = Command::new(&browser).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("3 servers listed"), "{stdout}");
    for name in ["Alpha", "Beta", "Gamma"] {
        assert!(stdout.contains(name), "{stdout}");
    }
    assert!(
        stdout.contains("switchboard"),
        "the protocol column: {stdout}"
    );
    assert!(stdout.contains("joined "), "{stdout}");
}
