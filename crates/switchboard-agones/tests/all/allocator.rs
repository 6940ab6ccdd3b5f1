use std::collections::BTreeMap;

use switchboard_agones::allocator::{AllocatedServer, Allocator, AllocatorConfig};
use switchboard_agones::fake::{FakeAllocator, FakePki};
use switchboard_agones::AgonesError;

fn server(name: &str, port: u16) -> AllocatedServer {
    AllocatedServer {
        name: name.into(),
        address: "10.0.0.7".into(),
        ports: [
            ("game".to_string(), port),
            ("websocket".to_string(), port + 1),
        ]
        .into(),
    }
}

fn labels() -> BTreeMap<String, String> {
    [(
        "switchboard.dev/scenario".to_string(),
        "islands".to_string(),
    )]
    .into()
}

#[tokio::test]
async fn a_match_gets_a_server_over_mutual_tls_and_the_fleet_is_told_its_labels() {
    let dir = tempfile::tempdir().unwrap();
    let pki = FakePki::write(dir.path()).unwrap();
    let fake = FakeAllocator::start(&pki, vec![server("rooms-a", 7000), server("rooms-b", 7100)])
        .await
        .unwrap();
    let allocator = Allocator::new(fake.config(&pki)).unwrap();
    let first = allocator.allocate(&labels()).await.unwrap();
    assert_eq!(first.name, "rooms-a");
    assert_eq!(first.addr("game").as_deref(), Some("10.0.0.7:7000"));
    let second = allocator.allocate(&labels()).await.unwrap();
    assert_eq!(second.addr("websocket").as_deref(), Some("10.0.0.7:7101"));
    let asked = fake.asked();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0].namespace, "default");
    assert_eq!(asked[0].labels, labels());
    // A server with a room free first, else a Ready one, of the fleet.
    let fleet = "switchboard-rooms".to_string();
    assert_eq!(
        asked[0].selectors,
        [
            (fleet.clone(), "Allocated".to_string()),
            (fleet, "Ready".to_string())
        ]
    );
    let err = allocator.allocate(&labels()).await.unwrap_err();
    assert!(matches!(err, AgonesError::NoServerFree), "{err:?}");
}

/// An allocation asked with the fake's client configuration changed by
/// `change`, which must fail on the TLS handshake: nothing is allocated.
async fn refused_on_tls(change: impl FnOnce(&mut AllocatorConfig, &FakePki)) {
    let dir = tempfile::tempdir().unwrap();
    let pki = FakePki::write(dir.path()).unwrap();
    let fake = FakeAllocator::start(&pki, vec![server("rooms-a", 7000)])
        .await
        .unwrap();
    let mut config = fake.config(&pki);
    change(&mut config, &pki);
    let err = Allocator::new(config)
        .unwrap()
        .allocate(&labels())
        .await
        .unwrap_err();
    assert!(matches!(err, AgonesError::Allocator(_)), "{err:?}");
    assert!(fake.asked().is_empty(), "refused before any allocation");
}

#[tokio::test]
async fn a_client_whose_certificate_the_allocator_does_not_trust_is_refused() {
    refused_on_tls(|config, pki| {
        config.cert = pki.stranger.0.clone();
        config.key = pki.stranger.1.clone();
    })
    .await;
}

#[tokio::test]
async fn an_allocator_whose_certificate_the_matchmaker_does_not_trust_is_not_asked() {
    refused_on_tls(|config, pki| config.ca = pki.other_ca.clone()).await;
}
