//! Arbitrary requests from four players into `RoomsLogic`, with joins,
//! leaves, lost and regained connections and sync ticks in any order. Any
//! panic is a bug, and so is any message the logic hands its server that
//! would not fit a frame (the paging rule). Shared by the fuzz target and
//! the corpus replay test.

use std::time::{Duration, Instant};

use bytes::Bytes;
use switchboard::message::ROOMS_CHANNEL;
use switchboard::{ClientId, GameLogic, Message, Outbox, Request};
use switchboard_rooms::protocol::RoomAction;
use switchboard_rooms::{RoomLimits, RoomsLogic};

/// The codec's default frame limit, less the frame's own header.
const FRAME_ROOM: usize = 1024 * 1024 - 16;

fn check(out: &mut Outbox) {
    for (_, message) in out.take() {
        assert!(
            message.content_bytes().len() < FRAME_ROOM,
            "a message of {} bytes (action {})",
            message.content_bytes().len(),
            message.action_id()
        );
    }
}

pub fn run(data: &[u8]) {
    // Small quotas, so that the fuzzer reaches them.
    let limits = RoomLimits {
        max_rooms: 3,
        max_entities: 64,
        max_entities_per_player: 16,
        max_room_state: 256 * 1024,
        max_rpcs_per_second: 8,
        ..RoomLimits::default()
    };
    let mut logic = RoomsLogic::with_limits(limits);
    let players: Vec<ClientId> = (1..=4).map(ClientId::from_u128).collect();
    let mut now = Instant::now();
    let mut out = Outbox::default();
    for (n, player) in players.iter().enumerate() {
        logic.on_join(*player, &format!("p{n}"), &mut out);
    }
    check(&mut out);
    // Each record: one byte (player and what), one byte (action), one byte
    // (length, times 4 for states that fill a room), then that many bytes.
    let mut rest = data;
    let mut id = 0;
    while let [op, action, len, tail @ ..] = rest {
        let len = (usize::from(*len) * if op & 0x80 != 0 { 4 } else { 1 }).min(tail.len());
        let (body, next) = tail.split_at(len);
        rest = next;
        let client = players[usize::from(op % 4)];
        match op / 4 % 8 {
            0..=3 => {
                id += 1;
                let message = Message::from_raw(
                    ROOMS_CHANNEL,
                    u16::from(*action % 40),
                    Bytes::copy_from_slice(body),
                );
                // What the manager does: only what decodes reaches the rules.
                if let Ok(message) = message.typed::<RoomAction>() {
                    let request = Request {
                        client,
                        id,
                        message,
                    };
                    if let Ok(command) = logic.validate(&request) {
                        logic.apply(client, command, &mut out);
                    }
                }
            }
            4 => {
                now += Duration::from_millis(u64::from(*action) * 7);
                logic.on_tick(now, &mut out);
            }
            5 => logic.on_connection_lost(client, &mut out),
            6 => logic.on_reconnect(client, &mut out),
            _ => {
                logic.on_leave(client, &mut out);
                logic.on_join(client, "back", &mut out);
            }
        }
        check(&mut out);
    }
}
