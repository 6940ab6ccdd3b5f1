//! One process, every listener (game TCP, WebSocket, AxisPy, admin): one
//! address fills each listener's share, and a bystander from another
//! address still gets in through every one of them. The caps are counted
//! per listener and per address, and together fit the open-file limit.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use switchboard::socket::WebSocketConfig;
use switchboard::{
    ClientConfig, ManagerConfig, ServerManager, SocketConfig, SocketEvent, SocketStream,
};
use switchboard_axispy::{AxisPyConfig, AxisPyListener};
use switchboard_rooms::{RoomClient, RoomsLogic};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

const WAIT: Duration = Duration::from_secs(10);

/// A TCP connection to `to` from loopback address 127.0.0.`from`.
async fn tcp_from(from: u8, to: SocketAddr) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::from(([127, 0, 0, from], 0))).ok()?;
    socket.connect(to).await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holding_every_listeners_cap_leaves_a_bystander_every_way_in() {
    let files = switchboard::process::raise_open_files_limit();
    assert!(files.soft >= files.before);
    let mut config = ManagerConfig::default();
    config.server.websocket = Some(WebSocketConfig::default());
    let manager = ServerManager::builder(RoomsLogic::new())
        .config(config)
        .spawn()
        .unwrap();
    let axispy = AxisPyListener::builder(manager.clone())
        .config(AxisPyConfig::default())
        .spawn()
        .unwrap();
    let admin = switchboard_admin::AdminServer::builder(std::sync::Arc::new(
        switchboard_admin::ManagerAdmin::new("rooms", manager.clone()),
    ))
    .spawn()
    .unwrap();
    let game = manager.local_addr();
    let ws = manager.websocket_addr().unwrap();

    // The attacker, 127.0.0.2: silent connections to the game's two ports,
    // AxisPy connections that upgrade and never join, admin connections
    // with half a header; more of each than its address may hold.
    let mut held = Vec::new();
    for _ in 0..150 {
        held.extend(tcp_from(2, game).await);
        held.extend(tcp_from(2, ws).await);
        if let Some(mut stream) = tcp_from(2, admin.local_addr()).await {
            let _ = stream.write_all(b"GET /api/overview HTTP/1.1\r\nHo").await;
            held.push(stream);
        }
    }
    let mut upgraded = Vec::new();
    for _ in 0..60 {
        if let Some(stream) = tcp_from(2, axispy.local_addr()).await {
            let url = format!("ws://{}/Lobby", axispy.local_addr());
            if let Ok((ws, _)) = tokio_tungstenite::client_async(url, stream).await {
                upgraded.push(ws);
            }
        }
    }
    assert_eq!(
        upgraded.len(),
        AxisPyConfig::default().max_connections_per_address
    );

    // The bystander, 127.0.0.1, gets in every way within a second or two.
    let started = Instant::now();
    let mut native = RoomClient::connect(game, ClientConfig::named("native"));
    let mut web = SocketStream::connect_ws(&format!("ws://{ws}/"), SocketConfig::default());
    let connected = tokio::time::timeout(WAIT, async {
        loop {
            match web.next_event().await {
                Some(SocketEvent::Connected) => return true,
                Some(SocketEvent::Disconnected(_)) | None => return false,
                Some(_) => {}
            }
        }
    })
    .await;
    assert_eq!(
        connected,
        Ok(true),
        "the WebSocket port let the bystander in"
    );
    let url = format!("ws://{}/Lobby", axispy.local_addr());
    let (mut player, _) = tokio_tungstenite::client_async(
        url,
        TcpStream::connect(axispy.local_addr()).await.unwrap(),
    )
    .await
    .expect("the AxisPy port let the bystander in");
    use futures::{SinkExt, StreamExt};
    let join = r#"{"t":"join_request","ts":1.0,"d":{"player_id":"abababab-abab-4bab-8bab-abababababab","player_name":"p"}}"#;
    player
        .send(tokio_tungstenite::tungstenite::Message::Text(join.into()))
        .await
        .unwrap();
    let accepted = tokio::time::timeout(WAIT, async {
        while let Some(Ok(frame)) = player.next().await {
            if frame.to_text().is_ok_and(|t| t.contains("join_accepted")) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(accepted, Ok(true));
    let at = admin.local_addr().to_string();
    let overview = tokio::task::spawn_blocking(move || {
        crate::support::http(&at, "GET", "/api/overview", None, "")
    });
    let (status, body) = tokio::time::timeout(WAIT, overview).await.unwrap().unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let deadline = Instant::now() + WAIT;
    while !native.client().is_welcomed() {
        assert!(
            Instant::now() < deadline,
            "the game port never welcomed the bystander"
        );
        native.poll();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    drop((held, upgraded));
}
