//! A headless Chromium (Debian's `chromium` and `chromium-driver`;
//! `.ci/run` installs them when missing) driven over WebDriver with plain
//! HTTP: for the tests of pages served by Switchboard's servers.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A chromedriver process and one headless Chromium session in it.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    /// Chromium's profile and temporary files: Chromium leaves
    /// `org.chromium.Chromium.scoped_dir.*` folders in `TMPDIR` when its
    /// driver is killed, so they go here and this goes with the browser.
    scratch: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The driver and every Chromium process it started share a process
        // group of their own: all of it goes, even when a test panicked
        // before `quit` (killing the driver alone left Chromium running,
        // and its renderers took the CPU from the tests after).
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver.id())])
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // Chromium may still be quitting after its driver: a few tries.
        for _ in 0..20 {
            if std::fs::remove_dir_all(self.scratch.path()).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One WebDriver call: the reply's `value`.
async fn call(port: u16, method: &str, path: &str, body: Option<Value>) -> Value {
    let what = format!("{method} {path}");
    tokio::time::timeout(Duration::from_secs(30), call_once(port, method, path, body))
        .await
        .unwrap_or_else(|_| panic!("WebDriver {what} took over 30 s"))
}

async fn call_once(port: u16, method: &str, path: &str, body: Option<Value>) -> Value {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    // chromedriver may keep the connection open: read by Content-Length.
    let mut response = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let (head_end, length) = loop {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "{method} {path}: closed early");
        response.extend_from_slice(&buf[..n]);
        if let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&response[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while response.len() < head_end + length {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "{method} {path}: closed early");
        response.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&response[head_end..head_end + length]);
    let reply: Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{method} {path}: {e}: {body}"));
    reply["value"].clone()
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session.
    pub async fn start() -> Browser {
        Self::start_with(&[]).await
    }

    /// Starts chromedriver and a headless Chromium session with `extra`
    /// switches (one self-signed server trusted by its key, say).
    pub async fn start_with(extra: &[String]) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let scratch = tempfile::tempdir().expect("a folder for Chromium");
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .process_group(0)
            .env("TMPDIR", scratch.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "chromedriver (Debian: apt-get install chromium chromium-driver; .ci/run does)",
            );
        let mut browser = Browser {
            driver,
            port,
            session: String::new(),
            scratch,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = browser.scratch.path().join("profile");
        let args: Vec<String> = [
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1200,800".into(),
            format!("--user-data-dir={}", profile.display()),
        ]
        .into_iter()
        .chain(extra.iter().cloned())
        .collect();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": args
            }
        }}});
        let session = call(port, "POST", "/session", Some(capabilities)).await;
        browser.session = session["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a session: {session}"))
            .to_string();
        browser
    }

    /// One WebDriver call within this session: the reply's `value`.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        call(self.port, method, &path, body).await
    }

    /// Runs `script` in the page (with `args`) and returns its result.
    pub async fn run(&self, script: &str, args: Value) -> Value {
        let body = json!({"script": script, "args": args});
        self.call("POST", "/execute/sync", Some(body)).await
    }

    /// Clicks the element `css` selects, as a user would.
    pub async fn click(&self, css: &str) {
        let body = json!({"using": "css selector", "value": css});
        let element = self.call("POST", "/element", Some(body)).await;
        let id = element
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}: {element}"))
            .to_string();
        self.call("POST", &format!("/element/{id}/click"), Some(json!({})))
            .await;
    }

    /// Writes a screenshot of the page to `target/<name>` (for a human
    /// to look at) and returns its path.
    pub async fn screenshot(&self, name: &str) -> std::path::PathBuf {
        let shot = self.call("GET", "/screenshot", None).await;
        let png = base64_decode(shot.as_str().expect("a screenshot"));
        assert_eq!(&png[1..4], b"PNG");
        let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .find(|dir| dir.join("Cargo.lock").exists())
            .expect("the workspace")
            .join("target");
        let path = target.join(name);
        std::fs::write(&path, png).unwrap();
        path
    }

    /// Ends the browser session.
    pub async fn quit(&self) {
        self.call("DELETE", "", None).await;
    }
}

/// Standard base64, for the screenshot.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text
        .bytes()
        .filter(|c| *c != b'=' && !c.is_ascii_whitespace())
        .collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= u32::from(value(*c)) << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
