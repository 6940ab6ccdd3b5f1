//! Arbitrary AxisPy messages into a live AxisPy listener (a real
//! `ServerManager` running `RoomsLogic`, over loopback WebSocket): each line
//! of the input is one text frame, after a valid join when the first byte is
//! even, so that the joined paths (state merges, spawns, RPCs by id, customs,
//! leaves) are reached. The listener must answer a WebSocket ping after the
//! lines (or close the connection for cause), never panic, and never hold
//! an entity state past its limit. Shared by the fuzz target and the corpus
//! replay test.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use switchboard::ServerManager;
use switchboard_axispy::{AxisPyConfig, AxisPyListener};
use switchboard_rooms::RoomsLogic;
use tokio_tungstenite::tungstenite::Message as Ws;

fn listener() -> SocketAddr {
    static LISTENER: OnceLock<SocketAddr> = OnceLock::new();
    *LISTENER.get_or_init(|| {
        let manager = ServerManager::builder(RoomsLogic::new())
            .spawn()
            .expect("a manager");
        let config = AxisPyConfig {
            max_entity_state_bytes: 2048,
            ..AxisPyConfig::default()
        };
        let listener = AxisPyListener::builder(manager.handle())
            .config(config)
            .spawn()
            .expect("an AxisPy listener");
        let addr = listener.local_addr();
        // Both serve every fuzz input, for the process's life.
        std::mem::forget(listener);
        std::mem::forget(manager);
        addr
    })
}

pub fn run(data: &[u8]) {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let at = listener();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    switchboard::runtime::handle().block_on(async move {
        let url = format!("ws://{at}/fuzz{}", n % 4);
        let Ok(stream) = tokio::net::TcpStream::connect(at).await else {
            return;
        };
        let Ok((mut ws, _)) = tokio_tungstenite::client_async(url, stream).await else {
            return;
        };
        if data.first().is_some_and(|b| b % 2 == 0) {
            let id = format!("{n:08x}-0000-4000-8000-00000000f022");
            let join = format!(
                r#"{{"t":"join_request","ts":1.0,"d":{{"player_id":"{id}","player_name":"fuzz"}}}}"#
            );
            if ws.send(Ws::Text(join.into())).await.is_err() {
                return;
            }
        }
        for line in data.get(1..).unwrap_or_default().split(|b| *b == b'\n') {
            let text = String::from_utf8_lossy(line).into_owned();
            if ws.send(Ws::Text(text.into())).await.is_err() {
                return;
            }
        }
        // The ping is answered once every line before it was handled.
        if ws.send(Ws::Ping(b"end".to_vec().into())).await.is_err() {
            return;
        }
        let answered = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(frame) = ws.next().await {
                match frame {
                    Ok(Ws::Pong(body)) if body.as_ref() == b"end" => return,
                    Ok(Ws::Close(_)) | Err(_) => return,
                    Ok(Ws::Text(text)) => assert!(
                        text.len() <= 64 * 1024 + 4096,
                        "a message of {} bytes",
                        text.len()
                    ),
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(answered.is_ok(), "the listener stopped answering");
        let _ = ws.close(None).await;
    });
}
