//! The smallest complete use of Switchboard: a chat server and its clients.
//!
//! ```text
//! cargo run --example chat                      # server + alice + bob in one process
//! cargo run --example chat -- --serve 7000      # a chat server on every interface, port 7000
//! cargo run --example chat -- --join 127.0.0.1:7000 --name carol   # type lines, Ctrl-D quits
//! ```
//!
//! Everything runs on the main thread through `poll()`: the network tasks only
//! queue events, and the slots below run when `poll()` is called.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchboard::{
    BindScope, ExtendedTcpServer, NetworkClient, PeerId, ServerConfig, ServerHandle, SocketConfig,
};

switchboard::channels! {
    /// The example has one channel.
    pub enum Chan { Chat = 16 }
}
switchboard::actions! {
    /// What travels on it.
    pub enum ChatAction {
        /// Client to server: my name is (String).
        Join = 1,
        /// Client to server: a line I typed (String).
        Say = 2,
        /// Server to clients: a [`Line`] someone said.
        Line = 3,
    }
}

/// A chat line as the server relays it: the server names the speaker, so a
/// client cannot speak for someone else.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    from: String,
    text: String,
}

/// Wires a chat server's slots: names per peer, relay of every line.
fn chat_server(server: &ExtendedTcpServer) {
    let names: Rc<RefCell<HashMap<PeerId, String>>> = Rc::default();
    let handle: ServerHandle = server.handle();
    let announce = move |from: &str, text: String| {
        let line = Line {
            from: from.to_string(),
            text,
        };
        match switchboard::Message::new(Chan::Chat, ChatAction::Line, &line) {
            Ok(message) => {
                let _ = handle.broadcast(&message);
            }
            Err(err) => eprintln!("cannot encode a line: {err}"),
        }
    };
    let (on_chat_names, on_chat_announce) = (names.clone(), announce.clone());
    server
        .subscribe(Chan::Chat, move |delivery| {
            let text: String = match delivery.content() {
                Ok(text) => text,
                Err(err) => return eprintln!("{}: bad content: {err}", delivery.sender),
            };
            match delivery.action::<ChatAction>() {
                Some(ChatAction::Join) => {
                    let name: String = text.chars().filter(|c| !c.is_control()).take(24).collect();
                    on_chat_names
                        .borrow_mut()
                        .insert(delivery.sender, name.clone());
                    on_chat_announce("server", format!("{name} joined"));
                }
                Some(ChatAction::Say) => {
                    let name = on_chat_names
                        .borrow()
                        .get(&delivery.sender)
                        .cloned()
                        .unwrap_or_else(|| delivery.sender.to_string());
                    on_chat_announce(&name, text);
                }
                _ => eprintln!("{}: unknown chat action", delivery.sender),
            }
        })
        .detach();
    server
        .signals()
        .peer_disconnected
        .connect(move |(peer, reason)| {
            if let Some(name) = names.borrow_mut().remove(peer) {
                announce("server", format!("{name} left ({reason})"));
            }
        })
        .detach();
}

/// A client that prints every line it hears, prefixed with `who`.
fn chat_client(addr: std::net::SocketAddr, who: &str) -> (NetworkClient, Rc<RefCell<usize>>) {
    let client = NetworkClient::connect(addr, SocketConfig::default());
    let heard = Rc::new(RefCell::new(0));
    let (count, me) = (heard.clone(), who.to_string());
    client
        .subscribe(Chan::Chat, move |delivery| {
            if let Ok(line) = delivery.content::<Line>() {
                println!("[{me} sees] {}: {}", line.from, line.text);
                *count.borrow_mut() += 1;
            }
        })
        .detach();
    let me = who.to_string();
    client
        .signals()
        .disconnected
        .connect(move |reason| println!("[{me}] disconnected: {reason}"))
        .detach();
    client
        .send(Chan::Chat, ChatAction::Join, who)
        .expect("queue join");
    (client, heard)
}

fn demo() -> Result<(), Box<dyn std::error::Error>> {
    let mut server = ExtendedTcpServer::bind(BindScope::Loopback, 0, ServerConfig::default())?;
    chat_server(&server);
    println!("chat server on {}", server.local_addr());
    let (mut alice, alice_heard) = chat_client(server.local_addr(), "alice");
    let (mut bob, bob_heard) = chat_client(server.local_addr(), "bob");

    let script = [
        ("alice", "hi bob, the signals work"),
        ("bob", "and the slots run on my thread"),
        ("alice", "see you"),
    ];
    // Each client sees 2 joins + 3 lines.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut said = 0;
    while *alice_heard.borrow() < 5 || *bob_heard.borrow() < 5 {
        if Instant::now() > deadline {
            return Err("the chat did not complete in 10 s".into());
        }
        // Speak once both have joined, one line per pass, in order.
        if said < script.len() && *alice_heard.borrow() >= 2 && *bob_heard.borrow() >= 2 {
            let (who, text) = script[said];
            let speaker = if who == "alice" { &alice } else { &bob };
            speaker.send(Chan::Chat, ChatAction::Say, text)?;
            said += 1;
        }
        server.poll();
        alice.poll();
        bob.poll_timeout(Duration::from_millis(5));
    }
    println!(
        "done: alice heard {}, bob heard {}",
        alice_heard.borrow(),
        bob_heard.borrow()
    );
    Ok(())
}

fn serve(port: u16) -> Result<(), Box<dyn std::error::Error>> {
    let mut server =
        ExtendedTcpServer::bind(BindScope::AllInterfaces, port, ServerConfig::default())?;
    chat_server(&server);
    println!(
        "chat server listening on {} (Ctrl-C stops it)",
        server.local_addr()
    );
    loop {
        server.poll_timeout(Duration::from_millis(50));
    }
}

fn join(addr: String, name: String) -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&addr)?
        .next()
        .ok_or("address did not resolve")?;
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
        if client.state() == switchboard::SocketState::Closed {
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
