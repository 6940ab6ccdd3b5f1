//! The smallest complete use of Switchboard: a chat server and its clients.
//!
//! ```text
//! cargo run --example chat                      # server + alice + bob in one process
//! cargo run --example chat -- --serve 7000      # a chat server on every interface, port 7000
//! cargo run --example chat -- --join 127.0.0.1:7000 --name carol   # type lines, Ctrl-D quits
//! ```
//!
//! The clients run on the main thread through `poll()`: the network tasks only
//! queue events, and the slots below run when `poll()` is called. The server
//! validates every line before relaying it, and names the speaker itself.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchboard::{
    Audience, BindScope, ClientConfig, ClientId, GameLogic, ManagerConfig, NetworkClient, Outbox,
    Rejection, Request, ServerManager,
};

switchboard::channels! {
    /// The example has one channel.
    pub enum Chan { Chat = 16 }
}
switchboard::actions! {
    /// What travels on it.
    pub enum ChatAction {
        /// Client to server: a line I typed (String).
        Say = 1,
        /// Server to clients: a [`Line`] someone said.
        Line = 2,
    }
}

/// A chat line as the server relays it: the server names the speaker, so a
/// client cannot speak for someone else.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
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
        if let Err(err) = out.send(Audience::All, Chan::Chat, ChatAction::Line, &line) {
            eprintln!("cannot encode a line: {err}");
        }
    }
}

impl GameLogic for ChatLogic {
    type Command = String;

    fn validate(&self, request: &Request) -> Result<String, Rejection> {
        let Chan::Chat = request.channel::<Chan>()?;
        match request.action::<ChatAction>()? {
            ChatAction::Say => {
                let text: String = request.content()?;
                match text.chars().count() {
                    0 => Err(Rejection::invalid("say something")),
                    1..=200 => Ok(text),
                    _ => Err(Rejection::invalid("lines are at most 200 characters")),
                }
            }
            ChatAction::Line => Err(Rejection::invalid("only the server sends lines")),
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

/// A client that prints every line it hears, prefixed with `who`, and
/// counts the lines players said.
fn chat_client(addr: impl ToString, who: &str) -> (NetworkClient, Rc<RefCell<usize>>) {
    let client = NetworkClient::connect(addr, ClientConfig::named(who));
    let heard = Rc::new(RefCell::new(0));
    let (count, me) = (heard.clone(), who.to_string());
    client.subscribe(Chan::Chat, move |delivery| {
        if let Ok(line) = delivery.content::<Line>() {
            println!("[{me} sees] {}: {}", line.from, line.text);
            if line.from != "server" {
                *count.borrow_mut() += 1;
            }
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
        .connect(move |err| println!("[{me}] {err:?}"));
    (client, heard)
}

fn demo() -> Result<(), Box<dyn std::error::Error>> {
    let server = ServerManager::spawn(
        BindScope::Loopback,
        0,
        ManagerConfig::default(),
        ChatLogic::default(),
    )?;
    println!("chat server on {}", server.local_addr());
    let (mut alice, alice_heard) = chat_client(server.local_addr(), "alice");
    let (mut bob, bob_heard) = chat_client(server.local_addr(), "bob");

    let script = [
        ("alice", "hi bob, the signals work"),
        ("bob", "and the slots run on my thread"),
        ("alice", "see you"),
    ];
    // Each client hears the three lines of the script.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut said = 0;
    while *alice_heard.borrow() < 3 || *bob_heard.borrow() < 3 {
        if Instant::now() > deadline {
            return Err("the chat did not complete in 10 s".into());
        }
        // Speak once both have joined, one line per pass, in order.
        if said < script.len()
            && alice.is_welcomed()
            && bob.is_welcomed()
            && *alice_heard.borrow() == said
        {
            let (who, text) = script[said];
            let speaker = if who == "alice" { &alice } else { &bob };
            speaker.send(Chan::Chat, ChatAction::Say, text)?;
            said += 1;
        }
        alice.poll();
        bob.poll_timeout(Duration::from_millis(5));
    }
    println!(
        "done: alice heard {}, bob heard {}",
        alice_heard.borrow(),
        bob_heard.borrow()
    );
    alice.close("bye");
    bob.close("bye");
    server.shutdown();
    Ok(())
}

fn serve(port: u16) -> Result<(), Box<dyn std::error::Error>> {
    println!("chat server on port {port} of every interface (Ctrl-C stops it)");
    switchboard::process::run_server(
        BindScope::AllInterfaces,
        port,
        ManagerConfig::default(),
        ChatLogic::default(),
        false,
    )?;
    Ok(())
}

fn join(addr: String, name: String) -> Result<(), Box<dyn std::error::Error>> {
    let (mut client, _) = chat_client(addr, &name);
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
            Ok(line) => client.send(Chan::Chat, ChatAction::Say, &line)?,
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
