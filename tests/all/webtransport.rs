//! WebTransport on the QUIC port, from a client that checks the server as a
//! browser does (`wtransport`'s `serverCertificateHashes`: only a
//! certificate with one of the hashes, ECDSA P-256, valid for at most 14
//! days): the session's stream is a connection like any other, sequenced
//! channels travel as its datagrams; a wrong hash, and an origin the server
//! does not allow, are refused.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use switchboard::socket::quic::webtransport::WebTransportConfig;
use switchboard::socket::quic::QuicConfig;
use switchboard::{
    BindScope, EndpointConfig, EndpointEvent, EndpointStream, Message, SocketConfig,
};
use wtransport::tls::Sha256Digest;

const STATE: u16 = 20;
const CHAT: u16 = 21;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    switchboard::runtime::handle().block_on(f)
}

/// A loopback server whose QUIC port speaks WebTransport by `web`, and
/// whose `STATE` channel is sequenced.
fn server_with(web: WebTransportConfig) -> EndpointStream {
    let config = EndpointConfig {
        quic: Some(QuicConfig {
            webtransport: Some(web),
            ..QuicConfig::default()
        }),
        socket: SocketConfig {
            sequenced_channels: switchboard::socket::ChannelSet::of([STATE]),
            ..SocketConfig::default()
        },
        ..EndpointConfig::default()
    };
    EndpointStream::bind(BindScope::Loopback, 0, config).expect("bind")
}

/// A browser-like session to the server's QUIC port, trusting `hashes`,
/// with `origin` as its `Origin` header.
async fn session(
    server: &EndpointStream,
    hashes: &[[u8; 32]],
    origin: Option<&str>,
) -> Result<wtransport::Connection, wtransport::error::ConnectingError> {
    let config = wtransport::ClientConfig::builder()
        .with_bind_default()
        .with_server_certificate_hashes(hashes.iter().map(|h| Sha256Digest::new(*h)))
        .build();
    let client = wtransport::Endpoint::client(config).expect("client endpoint");
    let url = format!("https://{}/", server.quic_addr().unwrap());
    let mut request = wtransport::endpoint::ConnectOptions::builder(url);
    if let Some(origin) = origin {
        request = request.add_header("origin", origin);
    }
    client.connect(request.build()).await
}

fn served_hashes(server: &EndpointStream) -> Vec<[u8; 32]> {
    server
        .handle()
        .webtransport_hashes()
        .iter()
        .map(|h| h.0)
        .collect()
}

#[test]
fn a_webtransport_session_is_a_connection_and_sequenced_channels_are_its_datagrams() {
    let mut server = server_with(WebTransportConfig::default());
    let hashes = served_hashes(&server);
    assert_eq!(hashes.len(), 2, "the certificate served now and the next");
    block_on(async {
        let session = session(&server, &hashes, None).await.expect("session");
        let (mut send, mut recv) = session.open_bi().await.unwrap().await.unwrap();
        raw_handshake(&mut tokio::io::join(&mut recv, &mut send)).await;
        let peer = loop {
            if let EndpointEvent::PeerConnected { peer, .. } = next_server_event(&mut server).await
            {
                break peer;
            }
        };
        // The stream: a frame as over TCP.
        let mut chat = vec![CHAT as u8, 1];
        chat.extend_from_slice(b"hi");
        send.write_all(&raw_frame(0, &chat)).await.unwrap();
        let (from, got) = next_message(&mut server).await;
        assert_eq!((from, got.channel_id()), (peer, CHAT));
        assert_eq!(got.content_bytes().as_ref(), b"hi");
        // A datagram from the page: sequence, channel, action, content.
        session
            .send_datagram([0, 0, 0, 7, STATE as u8, 1, b'p'])
            .unwrap();
        let (_, got) = next_message(&mut server).await;
        assert_eq!(
            (got.channel_id(), got.content_bytes().as_ref()),
            (STATE, &b"p"[..])
        );
        // A sequenced message from the server comes as a datagram.
        let side = server.handle().peer(peer).unwrap();
        assert!(side.is_webtransport());
        // The metrics count it as what it is.
        let open: Vec<_> = switchboard::admin::endpoint_counters(&server.handle())
            .into_iter()
            .filter(|c| c.name == "switchboard_endpoint_connections" && c.value > 0.0)
            .map(|c| c.labels)
            .collect();
        assert_eq!(
            open,
            [vec![("transport".to_string(), "webtransport".to_string())]]
        );
        side.send(&Message::from_raw(STATE, 2, Bytes::from_static(b"s")))
            .unwrap();
        let datagram = tokio::time::timeout(WAIT, session.receive_datagram())
            .await
            .expect("a datagram in time")
            .unwrap();
        assert_eq!(&datagram.payload()[..], &[0, 0, 0, 0, STATE as u8, 2, b's']);
        assert_eq!(side.datagram_stats().unwrap().delivered, 1);
    });
}

#[test]
fn attack_a_man_in_the_middle_with_another_certificate_is_refused_by_its_hash() {
    let server = server_with(WebTransportConfig::default());
    let err = block_on(session(&server, &[[7; 32]], None)).unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );
}

#[test]
fn attack_a_page_from_another_origin_opening_sessions_is_refused() {
    let server = server_with(WebTransportConfig {
        allowed_origins: vec!["https://game.example".into()],
        ..WebTransportConfig::default()
    });
    let hashes = served_hashes(&server);
    block_on(async {
        let err = session(&server, &hashes, Some("https://evil.example"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("rejected"), "{err}");
        session(&server, &hashes, Some("https://game.example"))
            .await
            .expect("the allowed origin");
    });
}

#[test]
fn after_a_rotation_a_page_holding_the_hashes_it_was_given_still_connects() {
    let server = server_with(WebTransportConfig::rotating(
        Duration::from_secs(7200),
        Duration::from_secs(2),
    ));
    let given = served_hashes(&server);
    // Wait for the rotation: the hashes served move on by one.
    let deadline = std::time::Instant::now() + WAIT;
    while served_hashes(&server)[0] != given[1] {
        assert!(std::time::Instant::now() < deadline, "no rotation");
        std::thread::sleep(Duration::from_millis(20));
    }
    block_on(session(&server, &given, None)).expect("the next certificate's hash was given");
}

#[test]
fn attack_a_session_that_never_opens_its_stream_is_closed_at_the_handshake_timeout() {
    // A page that opens sessions and nothing in them holds a place in the
    // gate only as long as any other handshake.
    let config = EndpointConfig {
        quic: Some(QuicConfig::default()),
        socket: SocketConfig {
            handshake_timeout: Duration::from_millis(500),
            ..SocketConfig::default()
        },
        ..EndpointConfig::default()
    };
    let server = EndpointStream::bind(BindScope::Loopback, 0, config).expect("bind");
    let hashes = served_hashes(&server);
    block_on(async {
        let idle = session(&server, &hashes, None).await.expect("session");
        let started = std::time::Instant::now();
        tokio::time::timeout(WAIT, idle.closed())
            .await
            .expect("the server closes it");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    });
    assert!(server.handle().handshake_failures() >= 1);
    assert_eq!(server.handle().peer_count(), 0);
}

#[test]
fn a_server_with_a_ca_issued_certificate_serves_it_to_browsers_and_gives_no_hashes() {
    use switchboard::socket::quic::webtransport::BrowserCertificate;
    use switchboard::tls::{ServerIdentity, TlsServer, TlsSettings};
    // An authority, and the server's certificate from it for 127.0.0.1
    // (as a domain's from a public one).
    let p256 = &rcgen::PKCS_ECDSA_P256_SHA256;
    let ca_key = rcgen::KeyPair::generate_for(p256).unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate_for(p256).unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let chain = format!("{}{}", leaf.pem(), ca.pem());
    let identity =
        ServerIdentity::from_pem(chain.as_bytes(), key.serialize_pem().as_bytes()).unwrap();
    let config = EndpointConfig {
        tls: TlsSettings::serving(TlsServer::new(&identity).unwrap()),
        quic: Some(QuicConfig {
            webtransport: Some(WebTransportConfig {
                certificate: BrowserCertificate::Identity,
                ..WebTransportConfig::default()
            }),
            ..QuicConfig::default()
        }),
        ..EndpointConfig::default()
    };
    let server = EndpointStream::bind(BindScope::AllInterfaces, 0, config).expect("bind");
    let port = server.quic_addr().unwrap().port();
    assert!(served_hashes(&server).is_empty());
    assert_eq!(
        server.handle().webtransport().unwrap().json(),
        format!(r#"{{"port":{port},"hashes":[]}}"#)
    );
    // A browser-like client that trusts the authority (no hashes) opens a
    // session.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    #[allow(
        deprecated,
        reason = "ring's provider, as the library's own TLS builds on"
    )]
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let config = wtransport::ClientConfig::builder()
        .with_bind_default()
        .with_custom_tls(tls)
        .build();
    block_on(async {
        wtransport::Endpoint::client(config)
            .unwrap()
            .connect(format!("https://127.0.0.1:{port}/"))
            .await
            .expect("a session trusting the authority")
    });
}
