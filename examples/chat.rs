//! The smallest complete use of Switchboard: a chat server and its clients.
//!
//! ```text
//! cargo run --example chat                      # server + alice + bob in one process
//! cargo run --example chat -- --serve 7000      # a chat server on every interface, port 7000
//! cargo run --example chat -- --join 127.0.0.1:7000 --name carol   # type lines, Ctrl-D quits
//! ```
//!
//! The clients run on the main thread: the network tasks only queue events.
//! Each client's slots print what it hears, and the demo's loop counts the
//! same lines from `drain()`: slots and pulled events are one path, and each
//! sees every line once. The server validates every line before relaying
//! it, and names the speaker itself.

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchboard::{
    Audience, BindScope, ClientConfig, ClientEvent, ClientId, GameLogic, NetworkClient, Outbox,
    Rejection, Request, ServerManager,
};

switchboard::channels! {
    /// The example has one channel.
    pub enum Chan { Chat = 16 }
}
switchboard::actions! {
    /// What travels on it.
    pub enum Chat in Chan::Chat {
        /// Client to server: a line I typed.
        Say(String) = 1,
        /// Server to clients: a line someone said.
        Line(Line) = 2,
    }
}

/// A chat line as the server relays it: the server names the speaker, so a
/// client cannot speak for someone else.
#[derive(Debug, Serialize, Deserialize)]
pub struct Line {
    from: String,
    text: String,
}

/// The server's rules: lines of 1 to 200 characters, relayed to everyone.
#[derive(Default)]
struct ChatLogic {
    names: HashMap<ClientId, String>,
}

impl ChatLogic {
    fn announce(out: &mut Outbox, from: &str, text: String) {
        let line = Line {
            from: from.into(),
            text,
        };
        out.send(Audience::All, Chat::Line(line));
    }
}

impl GameLogic for ChatLogic {
    type Message = Chat;
    type Command = String;

    fn validate(&self, request: &Request<Chat>) -> Result<String, Rejection> {
        match &request.message {
            Chat::Say(text) => match text.chars().count() {
                0 => Err(Rejection::invalid("say something")),
                1..=200 => Ok(text.clone()),
                _ => Err(Rejection::invalid("lines are at most 200 characters")),
            },
            Chat::Line(_) => Err(Rejection::invalid("only the server sends lines")),
        }
    }

    fn apply(&mut self, client: ClientId, text: String, out: &mut Outbox) {
        let name = self.names.get(&client).cloned().unwrap_or_default();
        Self::announce(out, &name, text);
    }

    fn on_join(&mut self, client: ClientId, name: &str, out: &mut Outbox) {
        self.names.insert(client, name.to_string());
        Self::announce(out, "server", format!("{name} joined"));
    }

    fn on_leave(&mut self, client: ClientId, out: &mut Outbox) {
        if let Some(name) = self.names.remove(&client) {
            Self::announce(out, "server", format!("{name} left"));
        }
    }
}

/// A client whose slots print every line it hears, prefixed with `who`.
fn chat_client(addr: impl ToString, who: &str) -> NetworkClient {
    let client = NetworkClient::connect(addr, ClientConfig::named(who));
    let me = who.to_string();
    client.subscribe(Chan::Chat, move |delivery| {
        if let Ok(Chat::Line(line)) = delivery.typed() {
            println!("[{me} sees] {}: {}", line.from, line.text);
        }
    });
    let me = who.to_string();
    client
        .signals()
        .disconnected
        .connect(move |reason| println!("[{me}] disconnected: {reason}"));
    let me = who.to_string();
    client
        .signals()
        .error
        .connect(move |err| println!("[{me}] {err}"));
    client
}

/// How many lines players said among `events` (the server's own notices
/// not counted).
fn lines_said(events: impl Iterator<Item = ClientEvent>) -> usize {
    events
        .filter(|event| match event {
            ClientEvent::Message(m) => matches!(m.typed(), Ok(Chat::Line(l)) if l.from != "server"),
            _ => false,
        })
        .count()
}

fn demo() -> Result<(), Box<dyn std::error::Error>> {
    let server = ServerManager::builder(ChatLogic::default()).spawn()?;
    println!("chat server on {}", server.local_addr());
    let mut alice = chat_client(server.local_addr(), "alice");
    let mut bob = chat_client(server.local_addr(), "bob");

    let script = [
        ("alice", "hi bob, the signals work"),
        ("bob", "and the slots run on my thread"),
        ("alice", "see you"),
    ];
    // Each client hears the three lines of the script.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut said, mut alice_heard, mut bob_heard) = (0, 0, 0);
    while alice_heard < 3 || bob_heard < 3 {
        if Instant::now() > deadline {
            return Err("the chat did not complete in 10 s".into());
        }
        // Speak once both have joined, one line per pass, in order.
        if said < script.len() && alice.is_welcomed() && bob.is_welcomed() && alice_heard == said {
            let (who, text) = script[said];
            let speaker = if who == "alice" { &alice } else { &bob };
            speaker.send(Chat::Say(text.into()))?;
            said += 1;
        }
        alice_heard += lines_said(alice.drain());
        bob_heard += lines_said(bob.drain_timeout(Duration::from_millis(5)));
    }
    println!("done: alice heard {alice_heard}, bob heard {bob_heard}");
    alice.close("bye");
    bob.close("bye");
    server.shutdown_blocking()?;
    Ok(())
}

fn serve(port: u16) -> Result<(), Box<dyn std::error::Error>> {
    println!("chat server on port {port} of every interface (Ctrl-C stops it)");
    ServerManager::builder(ChatLogic::default())
        .bind(BindScope::AllInterfaces)
        .port(port)
        .run()?;
    Ok(())
}

fn join(addr: String, name: String) -> Result<(), Box<dyn std::error::Error>> {
    let mut client = chat_client(addr, &name);
    let (lines_tx, lines) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    loop {
        match lines.try_recv() {
            Ok(line) => client.send(Chat::Say(line))?,
            Err(mpsc::TryRecvError::Disconnected) => {
                client.close("bye");
                client.poll_timeout(Duration::from_millis(200));
                return Ok(());
            }
            Err(mpsc::TryRecvError::Empty) => {}
        }
        client.poll_timeout(Duration::from_millis(20));
        if client.is_finished() {
            return Ok(());
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value_after = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    if args.iter().any(|a| a == "--serve") {
        let port = value_after("--serve")
            .and_then(|p| p.parse().ok())
            .unwrap_or(7000);
        serve(port)
    } else if let Some(addr) = value_after("--join") {
        let name = value_after("--name").unwrap_or_else(|| "guest".into());
        join(addr, name)
    } else if args.is_empty() {
        demo()
    } else {
        eprintln!("usage: chat [--serve PORT | --join ADDR [--name NAME]]");
        std::process::exit(2);
    }
}
