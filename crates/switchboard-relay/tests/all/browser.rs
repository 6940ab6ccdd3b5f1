//! The admin page in a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`; `.ci/run` installs them when missing), driven over
//! WebDriver: a client appears, five bots are spawned from the page and
//! appear, one is kicked from the page and leaves; the chart starts from the
//! server's history. A screenshot is written to
//! `target/admin-page.png` for a human to look at.

use crate::support;
use crate::webdriver;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{native_client, relay_with_admin};
use webdriver::Browser;

/// The admin page's clients table as (id, name, kind) rows.
async fn rows(browser: &Browser) -> Vec<(String, String, String)> {
    let script = "return [...document.querySelectorAll('#clients tbody tr')]
        .map(r => [...r.children].slice(0, 5).map(c => c.textContent));";
    let rows = browser.run(script, json!([])).await;
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

/// Waits up to `within` until `check` holds for the table; how long it
/// took (to within the 100 ms the table is read at).
async fn until(
    browser: &Browser,
    what: &str,
    within: Duration,
    check: impl Fn(&[(String, String, String)]) -> bool,
) -> Duration {
    let started = Instant::now();
    let deadline = started + within;
    loop {
        let rows = rows(browser).await;
        if check(&rows) {
            return started.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the table shows {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_page_in_chromium_shows_a_client_spawns_bots_and_kicks_one() {
    let (relay, admin) = relay_with_admin(Some("s3cret-admin-token")).await;
    // The admin server keeps a history from its start: let it gather a
    // few seconds before the page opens.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let browser = Browser::start().await;
    let url = format!("http://{}/", admin.local_addr());
    browser
        .call("POST", "/url", Some(json!({"url": url})))
        .await;

    // A client connects: the page shows it within 2 s.
    let (_ann, _) = native_client(relay.native_addr(), "ann").await;
    let took = until(&browser, "ann appears", Duration::from_secs(2), |rows| {
        rows.iter().any(|(_, name, _)| name == "ann")
    })
    .await;
    // The page update latency, for docs/ADMIN.md (`--nocapture` shows it).
    println!("page update latency: {} ms", took.as_millis());
    // The chart started from the server's history: its first point is
    // older than the page.
    let age = browser
        .run(
            "return history.length ? performance.timeOrigin / 1000 - history[0].t : -1;",
            json!([]),
        )
        .await;
    assert!(
        age.as_f64().unwrap() > 1.0,
        "the chart's first point: {age}"
    );
    // Its points carry the CPU, in percent of a core, from the server.
    let cpu = browser
        .run("return history.every((p) => p.cpu >= 0);", json!([]))
        .await;
    assert_eq!(cpu, json!(true));

    // The operator types the token, asks for 5 circling bots, clicks spawn.
    let fill = "for (const [id, v] of arguments[0]) {
            const e = document.getElementById(id); e.value = v;
            e.dispatchEvent(new Event('input')); }";
    let fields = json!([
        ["token", "s3cret-admin-token"],
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
    until(&browser, "5 bots appear", Duration::from_secs(5), |rows| {
        rows.iter().filter(|(_, _, kind)| kind == "bot").count() == 5
    })
    .await;
    // The columns fit the relay: it counts what each player sends, and
    // keeps no round trips or bytes, so those columns are not shown.
    let columns = browser
        .run(
            "return [...document.querySelectorAll('#clients th[data-key]')]
                .filter((th) => !th.hidden).map((th) => th.textContent);",
            json!([]),
        )
        .await;
    assert_eq!(
        columns,
        json!(["id", "name", "address", "place", "kind", "msgs in"])
    );
    // The zone's traffic: what its players sent, summed.
    let script = "const row = document.querySelector('#places tr[data-place=\"hall\"]');
        return row ? row.children[1].textContent : '';";
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let facts = browser.run(script, json!([])).await;
        let facts = facts.as_str().unwrap_or("").to_string();
        if facts.contains("players: 5") && !facts.contains("messages in: 0") {
            assert!(facts.contains("messages in: "), "{facts}");
            break;
        }
        assert!(Instant::now() < deadline, "the zone's traffic: {facts:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Kicks one (the reason prompt answered), and it leaves.
    let rows = rows(&browser).await;
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
    until(
        &browser,
        "the kicked bot leaves",
        Duration::from_secs(5),
        |rows| {
            !rows.iter().any(|(id, _, _)| *id == victim)
                && rows.iter().filter(|(_, _, kind)| kind == "bot").count() == 4
        },
    )
    .await;
    let victim_id: u32 = victim.parse().unwrap();
    assert!(!relay.clients().await.iter().any(|c| c.id == victim_id));

    // The last day, a point a minute, from the server's history.
    browser
        .run(
            "const r = document.getElementById('range'); r.value = 'minutes';
             r.dispatchEvent(new Event('change'));",
            json!([]),
        )
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while browser.run("return Array.isArray(day);", json!([])).await != json!(true) {
        assert!(std::time::Instant::now() < deadline, "the day's history");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Back to the last 10 minutes, at the top of the page, for the shot.
    browser
        .run(
            "const r = document.getElementById('range'); r.value = 'seconds';
             r.dispatchEvent(new Event('change')); window.scrollTo(0, 0);",
            json!([]),
        )
        .await;

    // For a human to look at.
    browser.screenshot("admin-page.png").await;
    browser.quit().await;
    relay.shutdown().await.unwrap();
}
