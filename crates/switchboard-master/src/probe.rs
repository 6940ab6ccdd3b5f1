//! Reachability probes: a host hosting from home asks the master whether
//! the internet reaches its game; the master connects back to the address
//! the request came from (never another) and reads the game's hello.

use std::net::SocketAddr;
use std::time::Duration;

use switchboard::message::Message;
use switchboard::socket::MAGIC;
use switchboard::socket::{SocketConfig, SocketStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::browser::ask;
use crate::protocol::{MasterAction, MasterChannel, ProbeRequest, ProbeResult};

/// Connects to `addr` and reads a Switchboard hello, within `timeout`.
pub(crate) async fn connect_back(addr: SocketAddr, timeout: Duration) -> ProbeResult {
    let attempt = async {
        let mut stream = TcpStream::connect(addr).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::ConnectionRefused {
                "refused: nothing listens there from outside (the router does not forward it)"
                    .to_string()
            } else {
                format!("could not connect: {e}")
            }
        })?;
        // Ours first, as every peer does (a server that speaks TLS to
        // other machines waits for the first byte to tell TLS from plain,
        // then answers a plain one from afar with its hello and a close:
        // reachable either way).
        let mut ours = vec![0, 0, 0, 7, 0];
        ours.extend_from_slice(&MAGIC);
        ours.extend_from_slice(&switchboard::PROTOCOL_VERSION.to_be_bytes());
        stream
            .write_all(&ours)
            .await
            .map_err(|e| format!("could not write a hello: {e}"))?;
        // Theirs: a 4-byte length, flags, "SWBD", the version.
        let mut hello = [0u8; 11];
        stream
            .read_exact(&mut hello)
            .await
            .map_err(|_| "something answered, and closed before a hello".to_string())?;
        if hello[5..9] != MAGIC {
            return Err("something answered, not a Switchboard server".to_string());
        }
        Ok("a Switchboard server answered".to_string())
    };
    let (reachable, detail) = match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(detail)) => (true, detail),
        Ok(Err(why)) => (false, why),
        Err(_) => (
            false,
            format!(
                "no answer within {} s (a firewall, or a router that does not forward it)",
                timeout.as_secs_f64()
            ),
        ),
    };
    ProbeResult {
        addr,
        reachable,
        detail,
    }
}

/// Asks the master at `master` whether the internet reaches this machine's
/// game on `port` (as the internet sees it: the mapped external port).
pub async fn probe_reachable(
    master: SocketAddr,
    port: u16,
    timeout: Duration,
) -> std::io::Result<ProbeResult> {
    let mut socket = SocketStream::dial(master, SocketConfig::default());
    let message = Message::new(
        MasterChannel::Master,
        MasterAction::Probe,
        &ProbeRequest { port },
    )
    .map_err(std::io::Error::other)?;
    let result = ask(&mut socket, message, timeout).await;
    socket.close("done");
    result
}
