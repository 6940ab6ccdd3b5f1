//! The admin page in a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`; `.ci/run` installs them when missing), driven over
//! WebDriver: a client appears, five bots are spawned from the page and
//! appear, one is kicked from the page and leaves. A screenshot is written to
//! `target/admin-page.png` for a human to look at.

#[path = "../../switchboard/tests/common/mod.rs"]
mod common;
mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{native_client, relay_with_admin};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A chromedriver process and one headless Chromium session in it.
struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
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
    async fn start() -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
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
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1200,800"]
            }
        }}});
        let session = call(port, "POST", "/session", Some(capabilities)).await;
        browser.session = session["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a session: {session}"))
            .to_string();
        browser
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        call(self.port, method, &path, body).await
    }

    /// Runs `script` in the page (with `args`) and returns its result.
    async fn run(&self, script: &str, args: Value) -> Value {
        let body = json!({"script": script, "args": args});
        self.call("POST", "/execute/sync", Some(body)).await
    }

    /// Clicks the element `css` selects, as a user would.
    async fn click(&self, css: &str) {
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

    /// The clients table as (id, name, kind) rows.
    async fn rows(&self) -> Vec<(String, String, String)> {
        let script = "return [...document.querySelectorAll('#clients tbody tr')]
            .map(r => [...r.children].slice(0, 5).map(c => c.textContent));";
        let rows = self.run(script, json!([])).await;
        rows.as_array()
            .map(|rows| {
                rows.iter()
                    .map(|r| {
                        let cell = |i: usize| r[i].as_str().unwrap_or("").to_string();
                        (cell(0), cell(1), cell(4))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits up to `within` until `check` holds for the table.
    async fn until(
        &self,
        what: &str,
        within: Duration,
        check: impl Fn(&[(String, String, String)]) -> bool,
    ) {
        let deadline = Instant::now() + within;
        loop {
            let rows = self.rows().await;
            if check(&rows) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: the table shows {rows:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_page_in_chromium_shows_a_client_spawns_bots_and_kicks_one() {
    let (relay, admin) = relay_with_admin(Some("s3cret")).await;
    let browser = Browser::start().await;
    let url = format!("http://{}/", admin.local_addr());
    browser
        .call("POST", "/url", Some(json!({"url": url})))
        .await;

    // A client connects: the page shows it within 2 s.
    let (_ann, _) = native_client(relay.native_addr(), "ann").await;
    browser
        .until("ann appears", Duration::from_secs(2), |rows| {
            rows.iter().any(|(_, name, _)| name == "ann")
        })
        .await;

    // The operator types the token, asks for 5 circling bots, clicks spawn.
    let fill = "for (const [id, v] of arguments[0]) {
            const e = document.getElementById(id); e.value = v;
            e.dispatchEvent(new Event('input')); }";
    let fields = json!([
        ["token", "s3cret"],
        ["bot-count", "5"],
        ["bot-place", "hall"]
    ]);
    browser.run(fill, json!([fields])).await;
    browser
        .run(
            "document.getElementById('bot-script').value = 'circle';",
            json!([]),
        )
        .await;
    browser.click("#spawn").await;
    browser
        .until("5 bots appear", Duration::from_secs(5), |rows| {
            rows.iter().filter(|(_, _, kind)| kind == "bot").count() == 5
        })
        .await;

    // Kicks one (the reason prompt answered), and it leaves.
    let rows = browser.rows().await;
    let (victim, _, _) = rows
        .iter()
        .find(|(_, _, kind)| kind == "bot")
        .unwrap()
        .clone();
    browser
        .run("window.prompt = () => 'enough circles';", json!([]))
        .await;
    browser
        .click(&format!(
            "#clients tbody tr[data-id='{victim}'] button.kick"
        ))
        .await;
    browser
        .until("the kicked bot leaves", Duration::from_secs(5), |rows| {
            !rows.iter().any(|(id, _, _)| *id == victim)
                && rows.iter().filter(|(_, _, kind)| kind == "bot").count() == 4
        })
        .await;
    let victim_id: u32 = victim.parse().unwrap();
    assert!(!relay.clients().await.iter().any(|c| c.id == victim_id));

    // For a human to look at.
    let shot = browser.call("GET", "/screenshot", None).await;
    let png = base64_decode(shot.as_str().expect("a screenshot"));
    assert_eq!(&png[1..4], b"PNG");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/admin-page.png");
    std::fs::write(&path, png).unwrap();
    browser.call("DELETE", "", None).await;
    relay.shutdown();
}
