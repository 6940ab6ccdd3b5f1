//! The admin page of a mode on Redis, in a real headless Chromium: its
//! header says Redis answers (calls, mean latency), then, once Redis is
//! gone, that calls fail, in red.

use crate::support;
use crate::webdriver;

use std::time::{Duration, Instant};

use serde_json::json;
use webdriver::Browser;

/// The header's Redis line and its class, when `check` holds for them.
async fn until_redis(browser: &Browser, what: &str, check: impl Fn(&str, &str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let shown = browser
            .run(
                "const e = document.getElementById('redis'); return [e.textContent, e.className];",
                json!([]),
            )
            .await;
        let (text, class) = (
            shown[0].as_str().unwrap_or(""),
            shown[1].as_str().unwrap_or(""),
        );
        if check(text, class) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the header shows {shown}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_page_shows_redis_health_and_its_failures() {
    let redis = switchboard_redis::testing::RedisProcess::start().unwrap();
    let url = redis.url();
    let args = ["relay", "--port", "0", "--admin-port", "0", "--redis", &url];
    let (_relay, _port, admin) = support::start_with_admin(&args.map(std::ffi::OsStr::new));
    let browser = Browser::start().await;
    browser
        .call(
            "POST",
            "/url",
            Some(json!({"url": format!("http://{admin}/")})),
        )
        .await;
    until_redis(&browser, "Redis answering", |text, class| {
        text.starts_with("Redis: ok, ") && text.contains("calls") && !class.contains("err")
    })
    .await;
    // Redis gone: the relay's next calls (its zone directory's renewals)
    // fail, and the header says so.
    drop(redis);
    until_redis(&browser, "Redis failing", |text, class| {
        text.contains("failed") && class.contains("err")
    })
    .await;
    browser.quit().await;
}
