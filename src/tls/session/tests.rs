//! The session over real loopback sockets, with rustls's client on the
//! other side.

use super::*;
use crate::tls::{ServerIdentity, ServerTrust, TlsClient, TlsServer};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const WAIT: Duration = Duration::from_secs(10);

type Client = crate::tls::ClientTlsStream<TcpStream>;

/// A session and the client at its other end.
async fn pair() -> (TlsStream, Client) {
    let identity = ServerIdentity::generate().unwrap();
    let server = TlsServer::new(&identity).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = tokio::spawn(async move {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let client = TlsClient::new(ServerTrust::pinned(identity.fingerprint()));
        client.handshake(tcp, &addr.to_string()).await.unwrap().0
    });
    let (tcp, _) = listener.accept().await.unwrap();
    let session = tokio::time::timeout(WAIT, server.handshake(tcp))
        .await
        .unwrap()
        .unwrap();
    (session, client.await.unwrap())
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn buffers(session: &TlsStream) -> (usize, usize, usize) {
    let state = session.state();
    (
        state.incoming.capacity(),
        state.plain.capacity(),
        state.outgoing.capacity(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_larger_than_a_record_and_than_the_readers_buffer_arrive_whole_both_ways() {
    let (mut session, mut client) = pair().await;
    let sent = pattern(100_000);
    let up = sent.clone();
    let writer = tokio::spawn(async move {
        client.write_all(&up).await.unwrap();
        client.flush().await.unwrap();
        let mut back = vec![0u8; 100_000];
        client.read_exact(&mut back).await.unwrap();
        back
    });
    // The reader's buffer is small, as an idle connection's is: what a
    // record holds past it waits in the session.
    let mut got = Vec::new();
    let mut small = [0u8; 256];
    while got.len() < sent.len() {
        let n = tokio::time::timeout(WAIT, session.read(&mut small))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the stream ended early");
        got.extend_from_slice(&small[..n]);
    }
    assert!(got == sent, "the bytes read are the bytes sent");
    session.write_all(&sent).await.unwrap();
    session.flush().await.unwrap();
    let back = tokio::time::timeout(WAIT, writer).await.unwrap().unwrap();
    assert!(
        back == sent,
        "the bytes written are the bytes the client read"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_holds_no_buffers() {
    let (mut session, mut client) = pair().await;
    client.write_all(&pattern(5_000)).await.unwrap();
    client.flush().await.unwrap();
    let mut got = vec![0u8; 5_000];
    session.read_exact(&mut got).await.unwrap();
    session.write_all(&pattern(5_000)).await.unwrap();
    session.flush().await.unwrap();
    assert_eq!(buffers(&session), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_send_to_a_full_socket_leaves_its_ciphertext_to_the_flush_in_order() {
    let (mut session, mut client) = pair().await;
    // The client reads nothing yet: the socket fills.
    let frame = pattern(16_000);
    let mut sent = 0usize;
    let backlog = loop {
        match session.try_send(&[IoSlice::new(&frame)]) {
            Some(true) => sent += 1,
            Some(false) => break true,
            None => break false,
        }
        assert!(sent < 10_000, "the socket never filled");
    };
    assert!(backlog, "the send that filled the socket left ciphertext");
    sent += 1;
    assert_eq!(
        session.try_send(&[IoSlice::new(&frame)]),
        None,
        "nothing is encrypted behind ciphertext that waits"
    );
    assert!(
        buffers(&session).2 > 0,
        "the ciphertext waits in the session"
    );
    let reader = tokio::spawn(async move {
        let mut got = vec![0u8; sent * frame.len()];
        client.read_exact(&mut got).await.unwrap();
        (got, frame, sent)
    });
    tokio::time::timeout(WAIT, session.flush())
        .await
        .unwrap()
        .unwrap();
    let (got, frame, sent) = tokio::time::timeout(WAIT, reader).await.unwrap().unwrap();
    assert!(
        got.chunks(frame.len()).all(|chunk| chunk == frame) && got.len() == sent * frame.len(),
        "every frame arrived whole and in order"
    );
    assert_eq!(buffers(&session).2, 0, "the flushed ciphertext is let go");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_closed_by_both_sides_reads_its_end_and_does_not_spin() {
    let (mut session, mut client) = pair().await;
    let mut reader = session.clone();
    // Read on another task: a session that spun at its end would hold a
    // worker and this test's deadline would still fire on the other.
    let read = tokio::spawn(async move {
        let mut sink = [0u8; 64];
        reader.read(&mut sink).await.unwrap()
    });
    session.shutdown().await.unwrap();
    let mut sink = [0u8; 64];
    let n = tokio::time::timeout(WAIT, client.read(&mut sink))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 0, "the client read our close_notify as the end");
    client.shutdown().await.unwrap();
    let n = tokio::time::timeout(WAIT, read).await.unwrap().unwrap();
    assert_eq!(
        n, 0,
        "the session read the client's close_notify as the end"
    );
    // And again, after both have closed, on another task too.
    let again = tokio::spawn(async move {
        let mut sink = [0u8; 64];
        session.read(&mut sink).await.unwrap()
    });
    let n = tokio::time::timeout(WAIT, again).await.unwrap().unwrap();
    assert_eq!(n, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_after_the_handshake_is_an_error_not_a_hang() {
    let (session, client) = pair().await;
    let (tcp, _) = client.into_inner();
    // An application-data record that does not decrypt.
    let mut raw = tcp;
    raw.write_all(&[0x17, 0x03, 0x03, 0x00, 0x20])
        .await
        .unwrap();
    raw.write_all(&[0xAA; 0x20]).await.unwrap();
    let mut reader = session.clone();
    let mut sink = [0u8; 64];
    let read = tokio::time::timeout(WAIT, reader.read(&mut sink))
        .await
        .unwrap();
    let err = read.expect_err("a record that does not decrypt is refused");
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_slices_of_one_direct_send_travel_as_one_record_and_leave_no_buffer() {
    let (session, client) = pair().await;
    // The client's own state decrypts what arrives raw on its socket.
    let (mut tcp, mut conn) = client.into_inner();
    let frames: [&[u8]; 3] = [b"first frame", b"second", b"third and last"];
    let slices: Vec<IoSlice<'_>> = frames.iter().map(|frame| IoSlice::new(frame)).collect();
    assert_eq!(session.try_send(&slices), Some(true), "all went at once");
    assert_eq!(buffers(&session), (0, 0, 0), "the session kept no buffer");

    let plain = frames.concat();
    let mut raw = vec![0u8; plain.len() + RECORD_OVERHEAD];
    tokio::time::timeout(WAIT, tcp.read_exact(&mut raw))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(raw[0], 0x17, "an application data record");
    let length = u16::from_be_bytes([raw[3], raw[4]]) as usize;
    assert_eq!(length, plain.len() + 1 + 16, "one record holds all three");
    let mut more = [0u8; 1];
    assert!(
        matches!(tcp.get_ref().try_read(&mut more), Err(err) if err.kind() == io::ErrorKind::WouldBlock),
        "nothing follows the one record"
    );

    conn.read_tls(&mut &raw[..]).unwrap();
    conn.process_new_packets().unwrap();
    let mut got = vec![0u8; plain.len()];
    std::io::Read::read_exact(&mut conn.reader(), &mut got).unwrap();
    assert_eq!(got, plain, "the record decrypts to the frames in order");
}
