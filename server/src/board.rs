//! [`BoardLogic`]: the built-in game of `switchboard-server`. A shared board
//! of keys and values, seats to claim, chat and whispers. It needs no game
//! code on either side, which makes it the server for tools, tests and the
//! examples; it also shows every [`GameLogic`] rule at work: validation
//! before change, state that survives a reconnect (a client's seat), and
//! updates addressed per client (a whisper reaches two clients, nobody else).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use switchboard::manager::{Audience, GameLogic, Outbox, Rejection, Request};
use switchboard::message::TypedMessage;
use switchboard::session::ClientId;

switchboard::channels! {
    /// The board's one channel.
    pub enum BoardChannel {
        /// Everything the board says and hears.
        Board = 16,
    }
}

switchboard::actions! {
    /// Requests (client → server) and updates (server → client) on the board.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Board in BoardChannel::Board {
        /// Request: say a line to everyone.
        Say(String) = 1,
        /// Request: say a line to one client.
        Whisper(Whisper) = 2,
        /// Request: set a key.
        Set(SetValue) = 3,
        /// Request: take a seat.
        Claim(u8) = 4,
        /// Request: give your seat up.
        Release = 5,
        /// Update: a line was said.
        Line(Line) = 10,
        /// Update: a key changed.
        Changed(Changed) = 11,
        /// Update: the whole board, to one client.
        Snapshot(Snapshot) = 12,
        /// Update: who sits where.
        Seats(Seats) = 13,
        /// Update: a player joined, left or lost its connection.
        Presence(Presence) = 14,
    }
}

/// A private line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Whisper {
    /// The one client who hears it.
    pub to: ClientId,
    /// The text.
    pub text: String,
}

/// A key and its new value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetValue {
    /// 1..=32 characters of `a-z`, `0-9`, `_`.
    pub key: String,
    /// At most 256 bytes.
    pub value: String,
}

/// A line as the server relays it: the server names the speaker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    /// Who said it.
    pub from: ClientId,
    /// Their name.
    pub name: String,
    /// What.
    pub text: String,
    /// Whether only the two of them see it.
    pub private: bool,
}

/// A key that changed, and who changed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changed {
    /// The key.
    pub key: String,
    /// The new value.
    pub value: String,
    /// Who set it.
    pub by: ClientId,
}

/// Seat number to occupant.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Seats(pub BTreeMap<u8, ClientId>);

/// Everything a (re)joining client needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The client's own id.
    pub you: ClientId,
    /// Every key.
    pub board: BTreeMap<String, String>,
    /// Who sits where.
    pub seats: Seats,
    /// Every player's name.
    pub players: BTreeMap<ClientId, String>,
}

/// A player's presence changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presence {
    /// Who.
    pub client: ClientId,
    /// Their name.
    pub name: String,
    /// `joined`, `back`, `away` or `left`.
    pub status: String,
}

/// The most keys the board holds.
pub const MAX_KEYS: usize = 256;
/// The longest value, in bytes.
pub const MAX_VALUE: usize = 256;
/// The longest line, in characters.
pub const MAX_LINE: usize = 500;

/// A validated board request.
#[derive(Debug)]
pub enum BoardCommand {
    /// Say to all.
    Say(String),
    /// Say to one.
    Whisper(Whisper),
    /// Set a key.
    Set(SetValue),
    /// Take a seat.
    Claim(u8),
    /// Give the seat up.
    Release,
}

/// The board game. See the module docs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BoardLogic {
    seats: u8,
    board: BTreeMap<String, String>,
    names: HashMap<ClientId, String>,
    seating: Seats,
    online: HashMap<ClientId, bool>,
}

impl BoardLogic {
    /// A board with `seats` seats (numbered 0..seats).
    pub fn new(seats: u8) -> Self {
        Self {
            seats,
            board: BTreeMap::new(),
            names: HashMap::new(),
            seating: Seats::default(),
            online: HashMap::new(),
        }
    }

    /// The value of a key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.board.get(key).map(String::as_str)
    }

    /// The seat a client holds.
    pub fn seat_of(&self, client: ClientId) -> Option<u8> {
        self.seating
            .0
            .iter()
            .find(|(_, c)| **c == client)
            .map(|(seat, _)| *seat)
    }

    fn name(&self, client: ClientId) -> String {
        self.names.get(&client).cloned().unwrap_or_default()
    }

    fn snapshot(&self, you: ClientId) -> Snapshot {
        Snapshot {
            you,
            board: self.board.clone(),
            seats: self.seating.clone(),
            players: self.names.iter().map(|(c, n)| (*c, n.clone())).collect(),
        }
    }

    /// A player arrives or comes back: it gets the whole board, the others
    /// hear it (`word`: "joined", "back").
    fn come_online(&mut self, client: ClientId, word: &str, out: &mut Outbox) {
        self.online.insert(client, true);
        out.send(
            Audience::One(client),
            Board::Snapshot(self.snapshot(client)),
        );
        self.presence(client, word, out);
    }

    fn presence(&self, client: ClientId, status: &str, out: &mut Outbox) {
        let presence = Presence {
            client,
            name: self.name(client),
            status: status.into(),
        };
        out.send(Audience::AllExcept(client), Board::Presence(presence));
    }
}

impl Default for BoardLogic {
    fn default() -> Self {
        Self::new(8)
    }
}

fn check_text(text: &str) -> Result<(), Rejection> {
    if text.trim().is_empty() {
        return Err(Rejection::invalid("say something"));
    }
    if text.chars().count() > MAX_LINE {
        return Err(Rejection::invalid(format!(
            "lines are at most {MAX_LINE} characters"
        )));
    }
    Ok(())
}

impl GameLogic for BoardLogic {
    type Message = Board;
    type Command = BoardCommand;

    fn validate(&self, request: &Request<Board>) -> Result<BoardCommand, Rejection> {
        match &request.message {
            Board::Say(text) => {
                check_text(text)?;
                Ok(BoardCommand::Say(text.clone()))
            }
            Board::Whisper(whisper) => {
                check_text(&whisper.text)?;
                if whisper.to == request.client {
                    return Err(Rejection::invalid("you cannot whisper to yourself"));
                }
                if self.online.get(&whisper.to) != Some(&true) {
                    return Err(Rejection::invalid("no such player online"));
                }
                Ok(BoardCommand::Whisper(whisper.clone()))
            }
            Board::Set(set) => {
                let key_ok = (1..=32).contains(&set.key.len())
                    && set
                        .key
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
                if !key_ok {
                    return Err(Rejection::invalid(
                        "keys are 1 to 32 characters of a-z, 0-9 and _",
                    ));
                }
                if set.value.len() > MAX_VALUE {
                    return Err(Rejection::invalid(format!(
                        "values are at most {MAX_VALUE} bytes"
                    )));
                }
                if !self.board.contains_key(&set.key) && self.board.len() >= MAX_KEYS {
                    return Err(Rejection::invalid(format!(
                        "the board holds at most {MAX_KEYS} keys"
                    )));
                }
                Ok(BoardCommand::Set(set.clone()))
            }
            Board::Claim(seat) => {
                let seat = *seat;
                if seat >= self.seats {
                    return Err(Rejection::invalid(format!(
                        "seats are 0 to {}",
                        self.seats - 1
                    )));
                }
                match self.seating.0.get(&seat) {
                    Some(holder) if *holder == request.client => {
                        Err(Rejection::invalid("you already sit there"))
                    }
                    Some(_) => Err(Rejection::invalid(format!("seat {seat} is taken"))),
                    None if self.seat_of(request.client).is_some() => {
                        Err(Rejection::invalid("release your seat first"))
                    }
                    None => Ok(BoardCommand::Claim(seat)),
                }
            }
            Board::Release => match self.seat_of(request.client) {
                Some(_) => Ok(BoardCommand::Release),
                None => Err(Rejection::invalid("you have no seat")),
            },
            other => Err(Rejection {
                kind: switchboard::manager::RejectionKind::UnknownAction,
                reason: format!("{} is an update, not a request", other.action_name()),
            }),
        }
    }

    fn apply(&mut self, client: ClientId, command: BoardCommand, out: &mut Outbox) {
        match command {
            BoardCommand::Say(text) => {
                let line = Line {
                    from: client,
                    name: self.name(client),
                    text,
                    private: false,
                };
                out.send(Audience::All, Board::Line(line));
            }
            BoardCommand::Whisper(Whisper { to, text }) => {
                let line = Line {
                    from: client,
                    name: self.name(client),
                    text,
                    private: true,
                };
                out.send(Audience::Only(vec![client, to]), Board::Line(line));
            }
            BoardCommand::Set(SetValue { key, value }) => {
                self.board.insert(key.clone(), value.clone());
                out.send(
                    Audience::All,
                    Board::Changed(Changed {
                        key,
                        value,
                        by: client,
                    }),
                );
            }
            BoardCommand::Claim(seat) => {
                self.seating.0.insert(seat, client);
                out.send(Audience::All, Board::Seats(self.seating.clone()));
            }
            BoardCommand::Release => {
                self.seating.0.retain(|_, holder| *holder != client);
                out.send(Audience::All, Board::Seats(self.seating.clone()));
            }
        }
    }

    fn on_join(&mut self, client: ClientId, name: &str, out: &mut Outbox) {
        self.names.insert(client, name.to_string());
        self.come_online(client, "joined", out);
    }

    fn on_reconnect(&mut self, client: ClientId, out: &mut Outbox) {
        self.come_online(client, "back", out);
    }

    fn on_connection_lost(&mut self, client: ClientId, out: &mut Outbox) {
        self.online.insert(client, false);
        self.presence(client, "away", out);
    }

    fn on_leave(&mut self, client: ClientId, out: &mut Outbox) {
        self.presence(client, "left", out);
        self.names.remove(&client);
        self.online.remove(&client);
        let had_seat = self.seat_of(client).is_some();
        self.seating.0.retain(|_, holder| *holder != client);
        if had_seat {
            out.send(
                Audience::AllExcept(client),
                Board::Seats(self.seating.clone()),
            );
        }
    }

    /// The whole board (a recording started mid-game begins with it).
    fn snapshot(&self, now: std::time::Instant) -> Result<Vec<u8>, String> {
        Ok(switchboard::record::clock::encode_at(now, self)?)
    }

    fn restore(&mut self, state: &[u8], now: std::time::Instant) -> Result<(), String> {
        *self = switchboard::record::clock::decode_at(now, state)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard::message::Message;

    fn request(client: ClientId, message: Board) -> Request<Board> {
        Request {
            client,
            id: 1,
            message,
        }
    }

    fn joined(logic: &mut BoardLogic, name: &str) -> ClientId {
        let client = ClientId::random();
        logic.on_join(client, name, &mut Outbox::default());
        client
    }

    #[test]
    fn whisper_is_addressed_to_exactly_two() {
        let mut logic = BoardLogic::default();
        let (ann, bob) = (joined(&mut logic, "ann"), joined(&mut logic, "bob"));
        let whisper = Whisper {
            to: bob,
            text: "psst".into(),
        };
        let command = logic
            .validate(&request(ann, Board::Whisper(whisper)))
            .unwrap();
        let mut out = Outbox::default();
        logic.apply(ann, command, &mut out);
        assert_eq!(out.updates().len(), 1);
        assert_eq!(out.updates()[0].0, Audience::Only(vec![ann, bob]));
    }

    #[test]
    fn taken_seat_is_rejected_and_nothing_changes() {
        let mut logic = BoardLogic::new(2);
        let (ann, bob) = (joined(&mut logic, "ann"), joined(&mut logic, "bob"));
        let command = logic.validate(&request(ann, Board::Claim(1))).unwrap();
        logic.apply(ann, command, &mut Outbox::default());
        let err = logic.validate(&request(bob, Board::Claim(1))).unwrap_err();
        assert_eq!(err.reason, "seat 1 is taken");
        assert_eq!(logic.seat_of(ann), Some(1));
        assert_eq!(logic.seat_of(bob), None);
        assert!(
            logic.validate(&request(bob, Board::Claim(2))).is_err(),
            "no seat 2"
        );
    }

    #[test]
    fn seat_survives_a_lost_connection_and_goes_on_leave() {
        let mut logic = BoardLogic::default();
        let ann = joined(&mut logic, "ann");
        let command = logic.validate(&request(ann, Board::Claim(3))).unwrap();
        logic.apply(ann, command, &mut Outbox::default());
        logic.on_connection_lost(ann, &mut Outbox::default());
        logic.on_reconnect(ann, &mut Outbox::default());
        assert_eq!(logic.seat_of(ann), Some(3));
        logic.on_leave(ann, &mut Outbox::default());
        assert_eq!(logic.seat_of(ann), None);
    }

    #[test]
    fn bad_keys_and_content_are_refused() {
        let mut logic = BoardLogic::default();
        let ann = joined(&mut logic, "ann");
        let bad_key = SetValue {
            key: "Bad Key".into(),
            value: "v".into(),
        };
        assert!(logic.validate(&request(ann, Board::Set(bad_key))).is_err());
        // Content of another type never reaches the rules: the framework
        // answers it (`BadContent`) when it does not decode as a `Board`.
        let content = switchboard::codec::encode_value(&42u64).unwrap();
        let wrong_type = Message::from_raw(16, 3, content.into());
        let err = Rejection::from(wrong_type.typed::<Board>().unwrap_err());
        assert_eq!(err.kind, switchboard::manager::RejectionKind::BadContent);
        let update_as_request = request(ann, Board::Seats(Seats::default()));
        assert_eq!(
            logic.validate(&update_as_request).unwrap_err().kind,
            switchboard::manager::RejectionKind::UnknownAction
        );
    }
}
