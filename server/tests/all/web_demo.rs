//! The relay's browser demo in a real headless Chromium: the page, served by
//! `switchboard-server relay --ws-port` itself, connects over WebSocket with
//! the JavaScript client, and a native Rust bot's movement shows up on it.
//! A screenshot is written to `target/relay-demo.png`.

use crate::webdriver;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard_relay::{Bot, BotConfig, Script};
use webdriver::Browser;

/// A relay process, killed when dropped.
struct Relay {
    child: Child,
    native: SocketAddr,
    websocket: SocketAddr,
    /// Its QUIC port, when started with `--quic-port`.
    quic: Option<SocketAddr>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_relay() -> Relay {
    start_relay_with(&["--bind", "loopback"])
}

/// A relay process with `args` besides its ports.
fn start_relay_with(args: &[&str]) -> Relay {
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard-server"))
        .args(["relay", "--port", "0", "--ws-port", "0"])
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut native = None;
    let mut websocket = None;
    let mut quic = None;
    let quic_wanted = args.contains(&"--quic-port");
    while native.is_none() || websocket.is_none() || (quic_wanted && quic.is_none()) {
        let line = lines.next().expect("the relay's lines").unwrap();
        if let Some(url) = line.strip_prefix("QUIC clients: quic://") {
            quic = Some(url.parse().unwrap());
        }
        if let Some(port) = line.strip_prefix("SWITCHBOARD READY 1 ") {
            native = Some(SocketAddr::from(([127, 0, 0, 1], port.parse().unwrap())));
        }
        // `wss://` off loopback.
        if let Some(url) = line.strip_prefix("WebSocket clients: ") {
            let (_, addr) = url.split_once("://").unwrap();
            websocket = Some(addr.trim_end_matches('/').parse().unwrap());
        }
    }
    // The rest of its lines, drained so that it never blocks on them.
    std::thread::spawn(move || lines.for_each(drop));
    Relay {
        child,
        native: native.unwrap(),
        websocket: websocket.unwrap(),
        quic,
    }
}

/// Waits until `script` returns something `check` accepts; returns it.
async fn until(
    browser: &Browser,
    what: &str,
    script: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let value = browser.run(script, json!([])).await;
        if check(&value) {
            return value;
        }
        assert!(Instant::now() < deadline, "{what}: the page says {value}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Asserts that the page's status line says `words`.
async fn assert_status(browser: &Browser, words: &str) {
    let status = browser
        .run(
            "return document.getElementById('status').textContent;",
            json!([]),
        )
        .await;
    assert!(status.as_str().unwrap().contains(words), "{status}");
}

/// The relay's demo page at `?query`, once it is connected.
async fn open_demo(relay: &Relay, query: &str) -> Browser {
    let browser = Browser::start().await;
    let url = format!("http://{}/?{query}", relay.websocket);
    open_demo_in(browser, url).await
}

/// `url`, the demo page, in `browser`, once it is connected.
async fn open_demo_in(browser: Browser, url: String) -> Browser {
    browser
        .call("POST", "/url", Some(json!({"url": url})))
        .await;
    until(
        &browser,
        "the page connects over WebSocket",
        "return !!(window.demo && window.demo.connected);",
        |v| v == true,
    )
    .await;
    browser
}

/// A native bot walking a circle of radius 15 in `zone` at `speed`.
fn walker(relay: &Relay, zone: &str, speed: f32) -> Bot {
    let config = BotConfig {
        start: [50.0, 0.0, 37.0],
        speed,
        ..BotConfig::new("walker", zone)
    };
    Bot::spawn(relay.native, config, Script::WalkCircle { radius: 15.0 })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_demo_over_wss_in_chromium_trusting_only_the_servers_key() {
    // A relay beyond loopback: TLS with its own self-signed identity. The
    // browser trusts that key alone (`--ignore-certificate-errors-spki-list`),
    // loads the page over https and plays over wss://.
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().to_str().unwrap();
    let relay = start_relay_with(&["--bind", "all", "--data-dir", dir]);
    let identity = switchboard::tls::ServerIdentity::load_or_create(data.path()).unwrap();
    let spki = identity.spki_sha256_base64().unwrap();
    let browser =
        Browser::start_with(&[format!("--ignore-certificate-errors-spki-list={spki}")]).await;
    let port = relay.websocket.port();
    let url = format!("https://127.0.0.1:{port}/?zone=secure&name=chromium");
    let browser = open_demo_in(browser, url).await;
    let _bot = walker(&relay, "secure", 30.0);
    let dots = "return [...document.querySelectorAll('#players li')].map(li => li.textContent);";
    until(&browser, "the bot's dot over wss", dots, |v| {
        v.as_array().is_some_and(|a| a.len() == 1)
    })
    .await;
    let scheme = browser
        .run("return window.demo.relay.socket.ws.url;", json!([]))
        .await;
    assert!(
        scheme.as_str().is_some_and(|u| u.starts_with("wss://")),
        "{scheme}"
    );
    browser.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_demo_in_chromium_shows_a_native_bot_moving() {
    let relay = start_relay();
    let browser = open_demo(&relay, "zone=demo&name=chromium").await;
    // A native bot walks a circle in the page's zone.
    let _bot = walker(&relay, "demo", 30.0);
    let dots = "return [...document.querySelectorAll('#players li')].map(li => li.textContent);";
    let first = until(&browser, "the bot's dot", dots, |v| {
        v.as_array().is_some_and(|a| a.len() == 1)
    })
    .await;
    // Its movement shows up: the position on the page changes.
    until(&browser, "the bot's dot moves", dots, |v| {
        v.as_array().is_some_and(|a| a.len() == 1) && *v != first
    })
    .await;
    // It came as compact transforms (the page asks for them): the page's
    // decoder holds the relay's precision and the bot.
    let compact = browser
        .run(
            "const c = window.demo.relay.compact; return [c.precision, c.slots.size];",
            json!([]),
        )
        .await;
    assert_eq!(compact[1], 1, "{compact}");
    assert!(
        (compact[0].as_f64().unwrap() - 0.01).abs() < 1e-6,
        "{compact}"
    );
    // The other way: a native bot that keeps 50 units behind the page's
    // player on x (the page stands at x = 50) heard the page's transforms.
    let follower = BotConfig {
        start: [90.0, 0.0, 60.0],
        ..BotConfig::new("follower", "demo")
    };
    let _follower = Bot::spawn(relay.native, follower, Script::FollowPlayer);
    until(
        &browser,
        "the follower behind the page's player",
        dots,
        |v| {
            v.as_array().is_some_and(|a| {
                a.iter()
                    .any(|li| li.as_str().unwrap_or("").contains(" at 0.0,"))
            })
        },
    )
    .await;
    assert_status(&browser, "connected over WebSocket as player").await;

    let shot = browser.screenshot("relay-demo.png").await;
    assert!(shot.exists());
    browser.quit().await;
}

/// Through the page's simulated network (75 ms, 20 ms of jitter, a 200 ms
/// stall every 3 s), a native bot walking a circle at 10 units a second is
/// drawn interpolated on (nearly) every frame, never faster than a few
/// times its own speed from one frame to the next: no jumps. Drawn raw in
/// the same frames, it jumps after every stall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interpolation_in_the_browser_demo_draws_a_bot_through_stalls_without_jumps() {
    let relay = start_relay();
    let query = "zone=smooth&name=chromium&latency=75&jitter=20&stall=200&stallEvery=2000";
    let browser = open_demo(&relay, query).await;
    let _bot = walker(&relay, "smooth", 10.0);
    until(
        &browser,
        "the bot drawn",
        "return window.demo.track.length;",
        |v| v.as_u64().is_some_and(|n| n > 0),
    )
    .await;
    // Six and a half seconds, a stall every two: the first 3.5 teach the
    // buffer what a stall costs (one falls in them), the rest hold another
    // at least, in some 180 frames.
    tokio::time::sleep(Duration::from_millis(6500)).await;
    let figures = browser
        .run(
            "const track = window.demo.track;
             const from = track[0].t + 3500;
             const frames = track.filter((f) => f.t >= from);
             const speed = (key) => {
               let worst = 0;
               for (let i = 1; i < frames.length; i++) {
                 const [a, b] = [frames[i - 1], frames[i]];
                 const dt = (b.t - a.t) / 1000;
                 if (dt <= 0) continue;
                 const d = Math.hypot(b[key][0] - a[key][0], b[key][2] - a[key][2]);
                 worst = Math.max(worst, d / dt);
               }
               return worst;
             };
             const jumps = (key) => frames.slice(1).filter((f, i) =>
               Math.hypot(f[key][0] - frames[i][key][0], f[key][2] - frames[i][key][2]) > 1.5).length;
             return { frames: frames.length,
                      interpolated: frames.filter((f) => f.kind === 'interpolated').length,
                      smoothWorstSpeed: speed('smooth'), smoothJumps: jumps('smooth'), rawJumps: jumps('raw') };",
            json!([]),
        )
        .await;
    println!("browser demo through the page's simulated network: {figures}");
    let number = |key: &str| figures[key].as_f64().unwrap();
    assert!(number("frames") > 100.0, "{figures}");
    assert!(
        number("interpolated") / number("frames") >= 0.99,
        "{figures}"
    );
    // 10 units a second, catching up at most 10 % faster: well under 40.
    assert!(number("smoothWorstSpeed") < 40.0, "{figures}");
    assert_eq!(number("smoothJumps"), 0.0, "{figures}");
    assert!(
        number("rawJumps") >= 1.0,
        "raw arrivals jump after a stall: {figures}"
    );
    browser.screenshot("relay-demo-smooth.png").await;
    browser.quit().await;
}

/// A native player over QUIC that asked for datagrams, in `zone`: it walks
/// along x (20 transforms a second, as datagrams) and keeps the ids of the
/// players whose transforms it heard, and how its datagrams went.
struct QuicPlayer {
    heard: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<u32>>>,
    stats: std::sync::Arc<std::sync::Mutex<Option<switchboard::socket::quic::DatagramStats>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for QuicPlayer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn quic_player(addr: SocketAddr, zone: &str) -> QuicPlayer {
    use switchboard::{SocketConfig, SocketEvent, SocketStream};
    use switchboard_relay::client_core::{RelayClientCore, RelayClientEvent};
    use switchboard_relay::{RelayAction, RelayMovesChannel, RelayOptions, Transform};

    let heard: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<u32>>> =
        std::sync::Arc::default();
    let stats: std::sync::Arc<std::sync::Mutex<Option<switchboard::socket::quic::DatagramStats>>> =
        std::sync::Arc::default();
    let zone = zone.to_string();
    let (seen, counted) = (std::sync::Arc::clone(&heard), std::sync::Arc::clone(&stats));
    let task = tokio::spawn(async move {
        let mut quic = SocketStream::dial(format!("quic://{addr}"), SocketConfig::default());
        let mut core = RelayClientCore::new("native quic", false).with_options(RelayOptions {
            datagrams: true,
            ..RelayOptions::default()
        });
        let mut ticker = tokio::time::interval(Duration::from_millis(50));
        let mut x = 10.0f32;
        let mut open = false;
        loop {
            tokio::select! {
                _ = ticker.tick(), if open => {
                    x = if x > 90.0 { 10.0 } else { x + 0.5 };
                    let mine = Transform {
                        position: [x, 0.0, 20.0],
                        zone: zone.clone(),
                        ..Transform::default()
                    };
                    quic.send_value(RelayMovesChannel, RelayAction::Transform, &mine).unwrap();
                    *counted.lock().unwrap() = quic.handle().datagram_stats();
                }
                event = quic.next_event() => match event {
                    Some(SocketEvent::Connected) => {
                        open = true;
                        for message in core.opened() {
                            quic.send(&message).unwrap();
                        }
                    }
                    Some(SocketEvent::Received(message)) => core.received(&message, |event| {
                        if let RelayClientEvent::Transform(heard) = event {
                            seen.lock().unwrap().insert(heard.peek("").unwrap().player_id);
                        }
                    }),
                    Some(_) => {}
                    None => return,
                },
            }
        }
    });
    QuicPlayer { heard, stats, task }
}

/// The relay's demo over WebTransport: the page learns the relay's QUIC
/// port and certificate hashes from `/webtransport`, plays over a
/// WebTransport session (its moves and its view as datagrams), and a native
/// QUIC player in the same zone and the page see each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_demo_over_webtransport_and_a_native_quic_player_see_each_other() {
    let relay = start_relay_with(&["--bind", "loopback", "--quic-port", "0"]);
    let browser = open_demo(&relay, "zone=wt&name=chromium").await;
    assert_status(&browser, "connected over WebTransport as player").await;
    let player = quic_player(relay.quic.expect("the QUIC port"), "wt");
    // The page sees the native player move.
    let dots = "return [...document.querySelectorAll('#players li')].map(li => li.textContent);";
    let first = until(&browser, "the QUIC player's dot", dots, |v| {
        v.as_array().is_some_and(|a| a.len() == 1)
    })
    .await;
    until(&browser, "the QUIC player's dot moves", dots, |v| {
        v.as_array().is_some_and(|a| a.len() == 1) && *v != first
    })
    .await;
    // The native player hears the page.
    let page_id = browser.run("return window.demo.relay.id;", json!([])).await;
    let page_id = page_id.as_u64().expect("the page's player id") as u32;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !player.heard.lock().unwrap().contains(&page_id) {
        assert!(
            Instant::now() < deadline,
            "the QUIC player never heard the page"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Both ways as datagrams: the page's moves and its view, the native
    // player's moves.
    let page = browser
        .run("return window.demo.relay.socket.datagramStats;", json!([]))
        .await;
    assert!(page["sent"].as_u64().unwrap() > 0, "{page}");
    assert!(page["delivered"].as_u64().unwrap() > 0, "{page}");
    assert_eq!(page["refused"], 0, "{page}");
    let native = player.stats.lock().unwrap().expect("QUIC datagram stats");
    assert!(native.sent > 0 && native.delivered > 0, "{native:?}");
    // The page takes compact transforms: over WebTransport, compact view
    // datagrams, read whole and acknowledged.
    let view = browser
        .run(
            "const v = window.demo.relay.compactView; return [v.acked.newest, v.unresolved];",
            json!([]),
        )
        .await;
    assert!(view[0].as_u64() > Some(0) && view[1] == 0, "{view}");
    browser.screenshot("relay-demo-webtransport.png").await;
    browser.quit().await;
}

/// Where WebTransport cannot open (UDP blocked: a port that never answers),
/// the socket falls back to WebSocket within its open timeout, and the game
/// sees one `open`, as if WebSocket had been asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_whose_webtransport_never_answers_falls_back_to_websocket() {
    let relay = start_relay();
    let browser = open_demo(&relay, "zone=fallback&name=chromium&transport=ws").await;
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let script = format!(
        "import('/js/index.js').then(({{ SwitchboardSocket }}) => {{
           const socket = new SwitchboardSocket(`ws://${{location.host}}/`, {{
             webtransport: {{ url: 'https://{}/', hashes: ['{}'], openTimeoutMs: 1500 }},
           }});
           window.opened = [];
           socket.on('open', () => window.opened.push(socket.transport));
         }});",
        silent.local_addr().unwrap(),
        "ab".repeat(32)
    );
    browser.run(&script, json!([])).await;
    until(
        &browser,
        "the socket open over WebSocket",
        "return window.opened;",
        |v| *v == json!(["websocket"]),
    )
    .await;
    browser.quit().await;
}

/// `GET /webtransport` on a relay's WebSocket port: the certificate hashes
/// its QUIC port serves browsers (what a page served there reads).
fn webtransport_hashes(websocket: SocketAddr) -> Vec<String> {
    use std::io::{Read, Write};
    let mut http = std::net::TcpStream::connect(websocket).unwrap();
    write!(
        http,
        "GET /webtransport HTTP/1.1\r\nHost: {websocket}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).unwrap();
    let (_, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    let offer: Value = serde_json::from_str(body).unwrap();
    let hashes = offer["hashes"].as_array().expect("hashes");
    hashes.iter().map(|h| h.as_str().unwrap().into()).collect()
}

/// Two relays sharing zones through a real Redis, each with WebTransport:
/// two browser players, one on each, play in one zone; the one whose relay
/// does not hold the zone is handed over to the other's WebTransport (the
/// hashes come in the redirect, from the directory), keeps its id, and goes
/// on sending and receiving datagrams there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_on_webtransport_is_handed_over_to_the_zone_s_relay_over_webtransport() {
    let redis = switchboard_redis::testing::RedisProcess::start().unwrap();
    let url = redis.url();
    let args = ["--bind", "loopback", "--quic-port", "0", "--redis", &url];
    let relays = [start_relay_with(&args), start_relay_with(&args)];
    let browser = open_demo(&relays[0], "zone=lobby&name=watcher").await;
    let reach: Vec<Value> = relays
        .iter()
        .map(|relay| {
            json!({
                "ws": format!("ws://{}/", relay.websocket),
                "url": format!("https://{}/", relay.quic.unwrap()),
                "hashes": webtransport_hashes(relay.websocket),
            })
        })
        .collect();
    let script = "const [reach] = arguments;
        import('/js/index.js').then(({ RelayClient }) => {
          window.players = reach.map((r, i) => new RelayClient(r.ws, {
            name: ['ann', 'bob'][i],
            socket: { webtransport: { url: r.url, hashes: r.hashes } },
          }));
          Promise.all(window.players.map((p) => p.ready)).then((ids) => {
            window.ids = ids;
            window.transportsAtFirst = window.players.map((p) => p.socket.transport);
            setInterval(() => window.players.forEach((p, i) =>
              p.move({ position: [i + 1, 0, 0], zone: 'harbour' })), 50);
          });
        });";
    browser.run(script, json!([reach])).await;
    let state = "const ps = window.players || [];
        const ids = window.ids || [];
        return {
          ids, first: window.transportsAtFirst || [],
          now: ps.map((p) => p.id),
          met: ids.length === 2 && ps[0].players.has(ids[1]) && ps[1].players.has(ids[0]),
          handedOver: ps.map((p) => p.handedOver),
          transports: ps.map((p) => p.socket.transport),
          datagrams: ps.map((p) => p.socket.datagramStats),
        };";
    let met = until(&browser, "the two players meet", state, |v| {
        v["met"] == true
            && v["handedOver"]
                .as_array()
                .is_some_and(|h| h.contains(&json!(true)))
    })
    .await;
    assert_eq!(
        met["first"],
        json!(["webtransport", "webtransport"]),
        "{met}"
    );
    assert_eq!(
        met["now"], met["ids"],
        "ids kept across the handover: {met}"
    );
    let handed: Vec<bool> = serde_json::from_value(met["handedOver"].clone()).unwrap();
    assert_eq!(handed.iter().filter(|h| **h).count(), 1, "{met}");
    assert_eq!(
        met["transports"],
        json!(["webtransport", "webtransport"]),
        "the one handed over is still on WebTransport: {met}"
    );
    // Datagrams flow on the new session both ways (its stats start anew).
    let moved = handed.iter().position(|h| *h).unwrap();
    let datagrams = |v: &Value| v["datagrams"][moved].clone();
    until(&browser, "datagrams on the new session", state, |v| {
        let d = datagrams(v);
        d["sent"].as_u64() > Some(5) && d["delivered"].as_u64() > Some(5)
    })
    .await;
    browser.quit().await;
}
