//! Switchboard's protocol: what is rules, not IO. No tokio, no sockets, no
//! OS clock and no OS entropy (time and randomness are passed in), so that
//! a game loop that is not tokio's, a test, or a replay of a recording can
//! drive it. `switchboard` is the tokio driver over it and re-exports what
//! a game needs; depend on this crate alone to speak the wire format from
//! elsewhere.
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | [`codec`] | the frame format: length prefix, flag byte, zlib when it pays, bincode; every size limit. The only module that names `bincode` or `flate2` |
//! | [`message`] | the envelope [`Message`](message::Message) `{channel, action, content}`; [`channels!`] and [`actions!`] for the application's enums |
//! | [`reason`] | close codes, why a connection ended, why a send failed |
//! | [`connection`] | one connection's settings ([`SocketConfig`](connection::SocketConfig)), its events ([`SocketEvent`](connection::SocketEvent)), and its rules, once for every driver: the framework's own frames and the handshake's check ([`control`](connection::control)), what a peer may send once open ([`inbound`](connection::inbound): frames out of the driver's buffer without a copy), the inflate budget ([`budget`](connection::budget)), the keep-alive rule; and [`ConnectionCore`](connection::ConnectionCore), the whole connection as a state machine (`handle_bytes` / `poll_transmit` / `poll_timeout`) for a game loop's own socket. The tokio driver in `switchboard` runs the same rules
//! | [`limits`] | rate limits, backoff after failures, the address a limit counts, outages told once; connections counted per address ([`ConnectionSlots`](limits::ConnectionSlots), the caps of every listener) and a game server's gate ([`Gate`](limits::Gate)) |
//! | [`session`] | client ids, reconnect tokens, the session table (grace periods, per-address shares), the server's ids |
//! | [`token`] | connect tokens: their layout, sealed and opened under a shared key (XChaCha20-Poly1305, the nonce passed in), and [`TokenGate`](token::TokenGate): each admitted once, the replay cache bounded, the time passed in |
//! | [`manager`] | the session protocol's messages (hello, welcome, requests, verdicts), [`GameLogic`](manager::logic::GameLogic) and what it answers with, the server's counters, the rules' settings ([`ManagerRules`](manager::config::ManagerRules)) and [`ManagerCore`](manager::core::ManagerCore): sessions, requests decoded and validated, addressed updates, as a state machine with time passed in |
//! | [`client`] | [`ClientCore`](client::ClientCore): the client's session as a state machine (hello, welcome, reconnects with backoff and jitter, request verdicts), its settings and its errors |
//! | [`entropy`] | where randomness comes from: passed in ([`entropy::Seeded`] for tests and replays) |
//! | [`record`] | recordings of a server's session (every input with its time, every random byte drawn, a summary of every output) and [`replay`](record::replay), which checks that the same inputs give the same outputs; a recording started mid-game begins with a snapshot of the core ([`ManagerCore::capture`](manager::core::ManagerCore::capture), its instants written by [`record::clock`]) |
//! | [`join_code`] | the join-code address `CODE@host:port` a listing names and a dialer reads (the relay's frames are `switchboard-hosting`'s) |
//! | [`histogram`] | [`Histogram`](histogram::Histogram): the one histogram of times (log-linear, percentiles within 1 %, cut at a metric's bounds for `/metrics`) |
//! | `harness` | (feature `harness`) client cores and a manager core on an in-memory network, with a clock the test moves; `harness::netsim`: a simulated network link with a seed |
//!
//! A game whose loop is not tokio's drives a client with
//! [`ConnectionCore`](connection::ConnectionCore) and
//! [`ClientCore`](client::ClientCore) over any byte stream: the root
//! package's `tests/all/std_loop_client.rs` does it over `std::net::TcpStream`.
//!
//! ## Example
//!
//! ```
//! use switchboard_proto::codec::CodecConfig;
//! use switchboard_proto::message::Message;
//!
//! switchboard_proto::channels! { enum Chan { Chat = 16 } }
//! switchboard_proto::actions! { enum Act { Say = 0 } }
//!
//! let config = CodecConfig::default();
//! let message = Message::new(Chan::Chat, Act::Say, &"hello").unwrap();
//! let frame = message.encode(&config).unwrap();
//! let mut bytes = bytes::BytesMut::from(&frame.as_bytes()[..]);
//! let mut decoder = switchboard_proto::codec::FrameDecoder::new(config);
//! let back = Message::decode(decoder.decode(&mut bytes).unwrap().unwrap().payload).unwrap();
//! assert_eq!(back.content::<String>().unwrap(), "hello");
//! ```

#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod client;
pub mod codec;
pub mod connection;
pub mod entropy;
#[cfg(feature = "harness")]
pub mod harness;
pub mod histogram;
pub mod join_code;
pub mod limits;
pub mod manager;
pub mod message;
pub mod reason;
pub mod record;
pub mod session;
pub mod token;

/// The protocol version this build speaks; both ends must match (the
/// connection's hello carries it).
pub const PROTOCOL_VERSION: u16 = 1;
