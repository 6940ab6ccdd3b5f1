//! Piping a player's frames to its host's data connection and back, frame
//! by frame: each frame's length bounded, each frame paced by its code's
//! bytes a second, nothing read from the game's messages.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use switchboard_proto::connection::control;
use switchboard_proto::reason::CloseCode;
use switchboard_proto::PROTOCOL_VERSION;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::WebSocketStream;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

use super::games::Game;
use super::serve::Shared;

/// A player's connection to the relay.
pub(super) enum Player {
    Tcp(TcpStream),
    WebSocket(Box<WebSocketStream<TcpStream>>),
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

/// Pipes until either side ends: a side that closes has its close passed
/// on; the other side's frames in flight still arrive.
pub(super) async fn run(player: Player, host: TcpStream, game: &Arc<Game>, shared: &Arc<Shared>) {
    let max = shared.config.max_frame_len;
    let (host_read, mut host_write) = host.into_split();
    let from_host = FramedRead::new(host_read, frames(max));
    match player {
        Player::Tcp(stream) => {
            let (read, mut write) = stream.into_split();
            let from_player = FramedRead::new(read, frames(max));
            let up = forward(from_player, &mut host_write, game, shared);
            let down = forward(from_host, &mut write, game, shared);
            tokio::join!(up, down);
        }
        Player::WebSocket(ws) => {
            let (mut ws_write, mut ws_read) = ws.split();
            let up = async {
                while let Some(Ok(message)) = ws_read.next().await {
                    let frame = match message {
                        WsMessage::Binary(frame) if one_frame(&frame, max) => frame,
                        WsMessage::Ping(_) | WsMessage::Pong(_) => continue,
                        _ => break,
                    };
                    pace(game, shared, frame.len()).await;
                    if host_write.write_all(&frame).await.is_err() {
                        break;
                    }
                }
                let _ = host_write.shutdown().await;
            };
            let down = async {
                let mut from_host = from_host;
                while let Some(Ok(frame)) = from_host.next().await {
                    pace(game, shared, frame.len()).await;
                    if ws_write
                        .send(WsMessage::Binary(frame.freeze()))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                let _ = ws_write.close().await;
            };
            tokio::join!(up, down);
        }
    }
}

/// Frames from `from` to `to`, paced, until `from` ends (then `to` is
/// shut down: the other side reads the end).
async fn forward<R, W>(
    mut from: FramedRead<R, LengthDelimitedCodec>,
    to: &mut W,
    game: &Arc<Game>,
    shared: &Arc<Shared>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    while let Some(Ok(frame)) = from.next().await {
        if frame.len() <= 4 {
            break; // an empty frame: a protocol error in any Switchboard peer
        }
        pace(game, shared, frame.len()).await;
        if to.write_all(&frame).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Counts `bytes` and waits while the code is past its bytes a second.
async fn pace(game: &Game, shared: &Shared, bytes: usize) {
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
