//! The master's list port under abuse, over loopback: list floods from one
//! address are cut off, oversized requests are refused, and a hostile master
//! cannot keep a browser paging forever.

use std::net::SocketAddr;
use std::time::Duration;

use switchboard::{BindScope, Message, ServerConfig, ServerEvent, ServerStream};
use switchboard_master::protocol::{ListPage, MasterAction, MasterChannel, MAX_PAGE};
use switchboard_master::{self as master, Filter, Listed, MasterConfig, MasterServer, ServerInfo};

const WAIT: Duration = Duration::from_secs(10);

async fn start(config: MasterConfig) -> SocketAddr {
    let (server, handle) = MasterServer::bind("127.0.0.1:0".parse().unwrap(), config)
        .await
        .unwrap();
    tokio::spawn(server.run(std::future::pending()));
    handle.local_addr()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_flood_from_one_address_is_cut_off() {
    let addr = start(MasterConfig {
        lists_per_minute: 60.0,
        ..MasterConfig::default()
    })
    .await;
    // A burst of a sixth of a minute's worth (10) is answered; more are not.
    let mut answered = 0;
    for _ in 0..20 {
        if master::fetch_list(addr, Filter::default(), WAIT)
            .await
            .is_ok()
        {
            answered += 1;
        }
    }
    assert_eq!(answered, 10);
    let stats = master::master_stats(addr, WAIT).await;
    assert!(stats.is_err(), "the address is still over its rate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_list_request_is_refused_at_the_frame_limit() {
    let addr = start(MasterConfig::default()).await;
    let filter = Filter {
        tags: vec![("k".repeat(3000), "v".repeat(3000))],
        ..Filter::default()
    };
    let result = master::fetch_list(addr, filter, WAIT).await;
    assert!(result.is_err(), "{result:?}");
    // A normal request from the same address still works.
    assert!(master::fetch_list(addr, Filter::default(), WAIT)
        .await
        .is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_master_saying_there_is_always_more_cannot_keep_a_browser_paging() {
    // A fake master: every page is full and the total is endless.
    let mut fake = ServerStream::bind(BindScope::Loopback, 0, ServerConfig::default()).unwrap();
    let addr = fake.local_addr();
    let handle = fake.handle();
    let pages = tokio::spawn(async move {
        let mut pages = 0u32;
        let info = ServerInfo {
            name: "x".into(),
            ..ServerInfo::default()
        };
        let listed = Listed {
            addr: "127.0.0.1:1".parse().unwrap(),
            info,
        };
        while let Some(event) = fake.next_event().await {
            match event {
                ServerEvent::Received(incoming) => {
                    pages += 1;
                    let page = ListPage {
                        servers: vec![listed.clone(); MAX_PAGE as usize],
                        page: pages - 1,
                        total: u32::MAX,
                    };
                    let reply =
                        Message::new(MasterChannel::Master, MasterAction::Page, &page).unwrap();
                    let _ = handle.send_to(incoming.peer, &reply);
                }
                ServerEvent::PeerDisconnected { .. } => break,
                _ => {}
            }
        }
        pages
    });
    let listed = tokio::time::timeout(
        Duration::from_secs(60),
        master::fetch_list(addr, Filter::default(), WAIT),
    )
    .await
    .expect("the browser stops on its own")
    .unwrap();
    assert_eq!(listed.len(), master::MAX_LISTED);
    assert_eq!(
        pages.await.unwrap(),
        (master::MAX_LISTED / MAX_PAGE as usize) as u32
    );
}
