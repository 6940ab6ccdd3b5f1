//! Arbitrary bytes as a recording: read and replayed against a small game.
//! Whatever they hold, the reader and the replay answer with a result,
//! never a panic, and never hold more than a record's limit. Shared by the
//! fuzz target and the corpus replay test.

use std::time::Instant;

use switchboard::record::{replay, RecordReader};
use switchboard::{ClientId, GameLogic, Message, Outbox, Rejection, Request};

/// Accepts anything and tells its sender.
struct Echo;

impl GameLogic for Echo {
    type Message = Message;
    type Command = Message;
    fn validate(&self, request: &Request) -> Result<Message, Rejection> {
        Ok(request.message.clone())
    }
    fn apply(&mut self, client: ClientId, message: Message, out: &mut Outbox) {
        out.send(switchboard::Audience::One(client), message);
    }
    // Takes any snapshot: the core's own state in it is what is fuzzed.
    fn restore(&mut self, _: &[u8], _: Instant) -> Result<(), String> {
        Ok(())
    }
}

pub fn run(data: &[u8]) {
    let Ok(reader) = RecordReader::new(std::io::Cursor::new(data)) else {
        return;
    };
    let _ = replay(reader, |_| Echo, Instant::now());
}
