//! Reachability probes: a host asks the master to connect back to it.

use std::net::SocketAddr;
use std::time::Duration;

use switchboard::{BindScope, ServerConfig, ServerStream};
use switchboard_master::{probe_reachable, MasterConfig, MasterServer};

const WAIT: Duration = Duration::from_secs(5);

fn master(config: MasterConfig) -> (switchboard_master::RunningMaster, SocketAddr) {
    let master = MasterServer::builder().config(config).spawn().unwrap();
    let addr = master.local_addr();
    (master, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_connects_back_to_the_host_and_finds_its_server() {
    let (_master, at) = master(MasterConfig::default());
    let game = ServerStream::bind(BindScope::Loopback, 0, ServerConfig::default()).unwrap();
    let port = game.local_addr().port();
    let result = probe_reachable(at, port, WAIT).await.unwrap();
    assert!(result.reachable, "{result:?}");
    // Connected back to where the request came from, and nowhere else.
    assert_eq!(
        result.addr,
        SocketAddr::new("127.0.0.1".parse().unwrap(), port)
    );
    assert_eq!(result.detail, "a Switchboard server answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_of_a_port_nothing_forwards_says_why() {
    let (_master, at) = master(MasterConfig::default());
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let result = probe_reachable(at, port, WAIT).await.unwrap();
    assert!(!result.reachable);
    assert!(result.detail.starts_with("refused"), "{result:?}");
    // Something that is not a Switchboard server.
    let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = other.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = other.accept().await {
            let _ =
                tokio::io::AsyncWriteExt::write_all(&mut stream, b"HTTP/1.1 400 Bad\r\n\r\n").await;
        }
    });
    let result = probe_reachable(at, port, WAIT).await.unwrap();
    assert!(!result.reachable);
    assert_eq!(
        result.detail,
        "something answered, not a Switchboard server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_flood_from_one_address_gets_answers_without_connections() {
    let config = MasterConfig {
        probes_per_minute: 2.0,
        ..MasterConfig::default()
    };
    let (master, at) = master(config);
    // A port that counts the connections made to it.
    let counted = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = counted.local_addr().unwrap().port();
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = connections.clone();
    tokio::spawn(async move {
        while let Ok(_accepted) = counted.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let mut details = Vec::new();
    for _ in 0..6 {
        let result = probe_reachable(at, port, WAIT).await.unwrap();
        details.push(result.detail);
    }
    let refused = details
        .iter()
        .filter(|d| d.starts_with("not checked: too many probes"))
        .count();
    assert_eq!(refused, 4, "{details:?}");
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 2);
    let stats = master.handle().snapshot().await.unwrap().stats;
    assert_eq!((stats.probes, stats.probes_refused), (2, 4));
}
