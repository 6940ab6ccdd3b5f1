//! Piping a player's frames to its host's data connection and back, frame
//! by frame: each frame's length bounded, each frame paced by its code's
//! bytes a second, nothing read from the game's messages.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use switchboard::tls::Secured;
use switchboard_proto::connection::control;
use switchboard_proto::reason::CloseCode;
use switchboard_proto::PROTOCOL_VERSION;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::WebSocketStream;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

use super::games::Game;
use super::serve::RendezvousState;

/// A player's connection to the relay.
pub(super) enum Player {
    /// On the TCP port: plain, or in TLS with the relay.
    Tcp(Secured),
    /// On the WebSocket port (`ws://`, or `wss://` off loopback).
    WebSocket(Box<WebSocketStream<Secured>>),
}

/// Whole frames (length field included) of at most `max` (the length
/// field's value); a longer one is an error that ends the pipe.
pub(super) fn frames(max: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .big_endian()
        .num_skip(0)
        // With the length field kept, the codec counts it in the frame.
        .length_adjustment(4)
        .max_frame_length(max)
        .new_codec()
}

/// Tells a player why it is turned away, the way every Switchboard client
/// reads it: a hello, then a close frame with `code` and `why`.
pub(super) async fn refuse(player: &mut Player, code: CloseCode, why: &str) {
    let hello = control::hello_frame(PROTOCOL_VERSION);
    let close = control::close_frame(code, why, &Default::default());
    match player {
        Player::Tcp(stream) => {
            let _ = stream.write_all(&[&hello[..], &close[..]].concat()).await;
            let _ = stream.shutdown().await;
            // What the player sent meanwhile (its hello) is read and let go:
            // a socket closed with unread bytes is reset, and the player
            // would read the reset instead of the reason.
            let linger = async {
                let mut sink = [0u8; 1024];
                let mut left: usize = 64 * 1024;
                while left > 0 {
                    match stream.read(&mut sink).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => left = left.saturating_sub(n),
                    }
                }
            };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), linger).await;
        }
        Player::WebSocket(ws) => {
            let _ = ws.send(WsMessage::Binary(hello)).await;
            let _ = ws.send(WsMessage::Binary(close)).await;
            let _ = SinkExt::close(&mut **ws).await;
        }
    }
}

/// How a direction of a pipe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The sender hung up (or closed): the other side is told by a
    /// shutdown, and its frames in flight still arrive.
    Closed,
    /// The sender broke a rule (a frame too long or empty, silence past
    /// `pipe_idle_timeout`, a frame unfinished past `frame_stall_timeout`),
    /// or the receiver is gone: both sides are closed.
    Broken,
}

/// Pipes until both directions end, or one breaks: a side that closes has
/// its close passed on (the other side's frames in flight still arrive);
/// a side that breaks a rule ends the whole pipe.
pub(super) async fn run(
    player: Player,
    host: Secured,
    game: &Arc<Game>,
    shared: &Arc<RendezvousState>,
) {
    let max = shared.config.max_frame_len;
    let (mut host_read, mut host_write) = tokio::io::split(host);
    match player {
        Player::Tcp(stream) => {
            // Each direction's first byte says what it carries: a player
            // that opens TLS with its host is piped record by record (the
            // relay sees ciphertext only), and so is the host's answer.
            let (mut read, mut write) = tokio::io::split(stream);
            let up = forward(&mut read, &mut host_write, game, shared);
            let down = forward(&mut host_read, &mut write, game, shared);
            both_unless_broken(up, down).await;
        }
        Player::WebSocket(ws) => {
            let (mut ws_write, mut ws_read) = ws.split();
            let idle = shared.config.pipe_idle_timeout;
            let up = async {
                let end = loop {
                    let message = match tokio::time::timeout(idle, ws_read.next()).await {
                        Ok(Some(Ok(message))) => message,
                        Ok(_) => break End::Closed,
                        Err(_) => break End::Broken,
                    };
                    let frame = match message {
                        WsMessage::Binary(frame) if one_frame(&frame, max) => frame,
                        WsMessage::Ping(_) | WsMessage::Pong(_) => continue,
                        WsMessage::Close(_) => break End::Closed,
                        _ => break End::Broken,
                    };
                    pace(game, shared, frame.len()).await;
                    if host_write.write_all(&frame).await.is_err() {
                        break End::Broken;
                    }
                };
                let _ = host_write.shutdown().await;
                end
            };
            let down = async {
                // A WebSocket message is a whole frame: the frame is read
                // whole (at most `max_frame_len`) before it goes on.
                let mut from_host = FramedRead::new(&mut host_read, frames(max));
                let end = loop {
                    let frame = match tokio::time::timeout(idle, from_host.next()).await {
                        Ok(Some(Ok(frame))) => frame,
                        Ok(None) => break End::Closed,
                        Ok(Some(Err(_))) | Err(_) => break End::Broken,
                    };
                    pace(game, shared, frame.len()).await;
                    let sent = ws_write.send(WsMessage::Binary(frame.freeze())).await;
                    if sent.is_err() {
                        break End::Broken;
                    }
                };
                let _ = ws_write.close().await;
                end
            };
            both_unless_broken(up, down).await;
        }
    }
}

/// Runs both directions to their end, unless one breaks: then the other is
/// dropped at once (and its connections with it).
async fn both_unless_broken(
    up: impl std::future::Future<Output = End>,
    down: impl std::future::Future<Output = End>,
) {
    tokio::pin!(up, down);
    let (mut up_done, mut down_done) = (false, false);
    while !(up_done && down_done) {
        let end = tokio::select! {
            end = &mut up, if !up_done => { up_done = true; end }
            end = &mut down, if !down_done => { down_done = true; end }
        };
        if end == End::Broken {
            return;
        }
    }
}

/// Bytes of one frame a direction holds at once: a frame is passed on in
/// pieces of at most this, whatever its length.
const PIPE_CHUNK: usize = 16 * 1024;

/// What a TCP pipe carries: the game's frames (a 4-byte length), or TLS
/// records between a player and its host (a 5-byte header: type, version,
/// a 2-byte length), which the relay bounds and paces without reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// Switchboard frames.
    Frames,
    /// TLS records.
    TlsRecords,
}

/// The largest TLS record body: 2^14 bytes of plaintext, 256 of
/// expansion (RFC 8446, 5.2).
const MAX_TLS_RECORD: usize = (1 << 14) + 256;

impl Framing {
    /// The framing of a direction whose first byte is `first`: a TLS
    /// handshake record's type, or a frame's length.
    fn of(first: u8) -> Framing {
        if first == 0x16 {
            Framing::TlsRecords
        } else {
            Framing::Frames
        }
    }

    /// The body's length in a unit's head, or `None` if the head breaks
    /// the framing (an empty or oversized frame, a record of no TLS type).
    fn body_len(self, head: &[u8; 5], max_frame_len: usize) -> Option<usize> {
        match self {
            Framing::Frames => {
                let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
                (len != 0 && len <= max_frame_len).then_some(len)
            }
            Framing::TlsRecords => {
                let len = u16::from_be_bytes([head[3], head[4]]) as usize;
                let record_type = (20..=24).contains(&head[0]);
                (record_type && head[1] == 3 && len <= MAX_TLS_RECORD).then_some(len)
            }
        }
    }

    /// Bytes of its head.
    fn head_len(self) -> usize {
        match self {
            Framing::Frames => 4,
            Framing::TlsRecords => 5,
        }
    }
}

/// Frames (or TLS records) from `from` to `to`, paced, each checked against
/// its cap by its head and passed on as it arrives (the relay never holds
/// a whole long frame), until `from` ends (then `to` is shut down: the
/// other side reads the end) or breaks a rule.
async fn forward<R, W>(
    from: &mut R,
    to: &mut W,
    game: &Arc<Game>,
    shared: &Arc<RendezvousState>,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let config = &shared.config;
    let mut chunk = vec![0u8; PIPE_CHUNK];
    // Decided by the direction's first byte, then kept.
    let mut framing = None;
    let end = loop {
        let mut unit = [0u8; 5];
        let read = async {
            let start = match framing {
                Some(_) => 0,
                None => {
                    from.read_exact(&mut unit[..1]).await?;
                    1
                }
            };
            let framing = *framing.get_or_insert(Framing::of(unit[0]));
            from.read_exact(&mut unit[start..framing.head_len()])
                .await?;
            std::io::Result::Ok(framing)
        };
        let framing = match tokio::time::timeout(config.pipe_idle_timeout, read).await {
            Ok(Ok(framing)) => framing,
            Ok(Err(_)) => break End::Closed,
            Err(_) => break End::Broken,
        };
        let Some(len) = framing.body_len(&unit, config.max_frame_len) else {
            // An empty frame is a protocol error in any Switchboard peer; a
            // longer one than the cap is refused; so is what is not TLS in
            // a TLS pipe.
            tracing::debug!(?framing, code = %game.code, "unit refused: the pipe ends");
            break End::Broken;
        };
        let head = &unit[..framing.head_len()];
        pace(game, shared, head.len()).await;
        if to.write_all(head).await.is_err() {
            break End::Broken;
        }
        let whole = tokio::time::Instant::now() + config.frame_stall_timeout;
        let mut left = len;
        let copied = loop {
            if left == 0 {
                break true;
            }
            let want = left.min(PIPE_CHUNK);
            let read = tokio::time::timeout_at(whole, from.read(&mut chunk[..want])).await;
            let n = match read {
                Ok(Ok(n)) if n > 0 => n,
                _ => break false,
            };
            pace(game, shared, n).await;
            if to.write_all(&chunk[..n]).await.is_err() {
                break false;
            }
            left -= n;
        };
        if !copied {
            break End::Broken;
        }
    };
    let _ = to.shutdown().await;
    end
}

/// Counts `bytes` and waits while the code is past its bytes a second.
async fn pace(game: &Game, shared: &RendezvousState, bytes: usize) {
    shared.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    let wait = game.charge(bytes, shared.config.bytes_per_second_per_code);
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
}

/// A WebSocket message is exactly one frame (`docs/PROTOCOL.md` section 11).
fn one_frame(message: &Bytes, max: usize) -> bool {
    message.len() > 5
        && message.len() - 4 <= max
        && u32::from_be_bytes([message[0], message[1], message[2], message[3]]) as usize
            == message.len() - 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::codec::Decoder;

    #[test]
    fn whole_frames_come_out_with_their_length_field() {
        let mut codec = frames(1024);
        let mut bytes =
            bytes::BytesMut::from(&b"\x00\x00\x00\x05\x00SWPI\x00\x00\x00\x02\x00x"[..]);
        let first = codec.decode(&mut bytes).unwrap().unwrap();
        assert_eq!(&first[..], b"\x00\x00\x00\x05\x00SWPI");
        let second = codec.decode(&mut bytes).unwrap().unwrap();
        assert_eq!(&second[..], b"\x00\x00\x00\x02\x00x");
    }
}
