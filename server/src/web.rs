//! The WebSocket listener's options, shared by every mode that has one, and
//! the pages it serves: the JavaScript client's modules and the browser
//! demos built on them.

use clap::Args;
use switchboard::{EndpointConfig, WebSocketConfig};

/// The JavaScript client, served as ES modules under `/js/`, so that a page
/// on the WebSocket port imports it from the server itself (no CDN, no
/// build step).
const CLIENT_MODULES: &[(&str, &str)] = &[
    (
        "bincode.js",
        include_str!("../../clients/js/src/bincode.js"),
    ),
    ("frame.js", include_str!("../../clients/js/src/frame.js")),
    ("socket.js", include_str!("../../clients/js/src/socket.js")),
    (
        "webtransport.js",
        include_str!("../../clients/js/src/webtransport.js"),
    ),
    (
        "session.js",
        include_str!("../../clients/js/src/session.js"),
    ),
    ("rooms.js", include_str!("../../clients/js/src/rooms.js")),
    ("relay.js", include_str!("../../clients/js/src/relay.js")),
    (
        "compact.js",
        include_str!("../../clients/js/src/compact.js"),
    ),
    (
        "smoothing.js",
        include_str!("../../clients/js/src/smoothing.js"),
    ),
    ("index.js", include_str!("../../clients/js/src/index.js")),
];

/// The relay demo: every player as a moving dot.
const RELAY_DEMO: &str = include_str!("../assets/relay-demo.html");

/// `--ws-port` and `--ws-origin`.
#[derive(Debug, Args)]
pub(crate) struct WsArgs {
    /// Also listen for WebSocket clients (browsers) on this port: the same
    /// protocol, sessions, rooms and zones as the TCP port. 0 picks a port.
    #[arg(long)]
    ws_port: Option<u16>,
    /// An origin browsers may connect from, e.g. `https://game.example`
    /// (repeat for several; default: any).
    #[arg(long = "ws-origin", value_name = "ORIGIN")]
    ws_origins: Vec<String>,
}

/// Which pages a mode serves on its WebSocket port.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pages {
    /// The JavaScript client only.
    Client,
    /// The client and the relay demo at `/`.
    RelayDemo,
}

impl WsArgs {
    /// Puts the listener into `server` when a port was given.
    pub(crate) fn apply(&self, server: &mut EndpointConfig, pages: Pages) {
        let Some(port) = self.ws_port else { return };
        let mut ws = WebSocketConfig {
            allowed_origins: self.ws_origins.clone(),
            ..WebSocketConfig::on_port(port)
        };
        for (name, source) in CLIENT_MODULES {
            ws = ws.with_page(
                &format!("/js/{name}"),
                "text/javascript; charset=utf-8",
                *source,
            );
        }
        if let Pages::RelayDemo = pages {
            ws = ws.with_page("/", "text/html; charset=utf-8", RELAY_DEMO);
        }
        server.websocket = Some(ws);
    }
}

/// Prints where WebSocket clients connect, if they can (`wss://` when the
/// server speaks TLS to other machines), and the page a browser opens when
/// the mode serves one.
pub(crate) fn announce(addr: Option<std::net::SocketAddr>, tls: bool, pages: Pages) {
    let Some(addr) = addr else { return };
    let (http, ws) = if tls {
        ("https", "wss")
    } else {
        ("http", "ws")
    };
    if let Pages::RelayDemo = pages {
        println!("the page: {http}://{addr}/");
    }
    println!("WebSocket clients: {ws}://{addr}/");
}

#[cfg(test)]
mod tests {
    /// A module the client gains and the server does not serve breaks
    /// every page that imports the client (`index.js` imports them all).
    #[test]
    fn every_module_of_the_javascript_client_is_served() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../clients/js/src");
        let mut missing = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let served = super::CLIENT_MODULES.iter().any(|(n, _)| *n == name);
            // node.js speaks node's `tls`: no page imports it.
            if name.ends_with(".js") && !served && name != "node.js" {
                missing.push(name);
            }
        }
        assert!(missing.is_empty(), "not served: {missing:?}");
    }
}
