//! The host's side of the join-code relay: a control connection out to the
//! relay (kept, and its code with it, across reconnects), and for each
//! player the relay announces, a data connection given to the game's
//! server as if the player had connected to it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::frames::{Frame, Secret, MAX_FRAME_LEN, VERSION};
use futures::StreamExt;
use switchboard::socket::{ByteStream, Dialer};
use switchboard::tls::{default_data_dir, Fingerprint, ServerIdentity, TlsServer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};
use tokio_util::codec::FramedRead;

use super::pipe::frames;

/// Where a host's relayed players go.
#[derive(Clone)]
pub enum HostTarget {
    /// Handed to the server in this process, with the player's address
    /// (`ManagerHandle::attach`); `false` when the server turned it away.
    /// A player that opened TLS with the host is handed over decrypted.
    Attach(Arc<dyn Fn(Box<dyn ByteStream>, SocketAddr) -> bool + Send + Sync>),
    /// Piped to a server listening at this address (a child process): it
    /// sees each player as a connection from this machine.
    Forward(SocketAddr),
}

impl std::fmt::Debug for HostTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostTarget::Attach(_) => f.write_str("Attach(..)"),
            HostTarget::Forward(addr) => write!(f, "Forward({addr})"),
        }
    }
}

/// How a host reaches its relay.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The relay, `host:port`.
    pub relay: String,
    /// The first wait before connecting again after the relay was lost
    /// (default 250 ms), doubled up to `max_retry`.
    pub retry: Duration,
    /// The longest wait between attempts (default 5 s).
    pub max_retry: Duration,
    /// How long connecting (and the relay's answer) may take (default 5 s).
    pub timeout: Duration,
    /// How long the relay may stay silent before it is taken for lost
    /// (default 35 s: it pings every 10 s).
    pub silence: Duration,
    /// The identity the host presents to players who open TLS with it
    /// through the relay (end to end: the relay pipes ciphertext). Default
    /// none: the host's own, from the default data directory (the one its
    /// server would serve), loaded when the link starts.
    pub identity: Option<TlsServer>,
    /// How the host reaches the relay (default [`Dialer::default`]): a
    /// relay on another machine in TLS, checked by the dialer's trust (the
    /// platform's roots, then trust on first use; pin it with
    /// [`Dialer::trust`]). The control connection always; a WebSocket
    /// player's data connection too (its frames are plain inside: a browser
    /// cannot run TLS with the host through the relay). A native player's
    /// data connection carries its own TLS with the host, end to end.
    pub dialer: Dialer,
}

impl HostConfig {
    /// A host of the relay at `relay` (`host:port`), default timings.
    pub fn new(relay: impl Into<String>) -> Self {
        Self {
            relay: relay.into(),
            retry: Duration::from_millis(250),
            max_retry: Duration::from_secs(5),
            timeout: Duration::from_secs(5),
            silence: Duration::from_secs(35),
            identity: None,
            dialer: Dialer::default(),
        }
    }
}

/// Where the host stands with its relay.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostStatus {
    /// Connecting (the first time).
    Connecting,
    /// Registered: players join with `code`.
    Ready {
        /// The join code.
        code: String,
        /// The relay, as configured.
        relay: String,
        /// The fingerprint players pin the host by (`--trust`); `None`
        /// when the host has no TLS identity (its players then speak plain
        /// through the relay).
        fingerprint: Option<Fingerprint>,
    },
    /// The relay was lost; connecting again (the code is kept if the
    /// relay hears back within its grace).
    Lost(String),
    /// The relay refused this host (its reason); no more attempts.
    Refused(String),
}

impl std::fmt::Display for HostStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostStatus::Connecting => f.write_str("connecting to the join-code relay"),
            HostStatus::Ready {
                code,
                relay,
                fingerprint,
            } => {
                write!(
                    f,
                    "join code {code}: players join with --join {code}@{relay}"
                )?;
                match fingerprint {
                    Some(fingerprint) => write!(f, " --trust {fingerprint}"),
                    None => Ok(()),
                }
            }
            HostStatus::Lost(why) => {
                write!(f, "the join-code relay was lost ({why}); connecting again")
            }
            HostStatus::Refused(why) => write!(f, "the join-code relay refused this game: {why}"),
        }
    }
}

/// A host's link to a join-code relay, on the current tokio runtime.
/// Dropping it (or [`HostLink::stop`]) closes the control connection; the
/// players already piped keep their connections until they end.
#[derive(Debug)]
pub struct HostLink {
    status: watch::Receiver<HostStatus>,
    stop: Option<oneshot::Sender<()>>,
}

impl HostLink {
    /// Connects to the relay of `config` and serves the players it
    /// announces to `target`. Must be called within a tokio runtime.
    pub fn start(config: HostConfig, target: HostTarget) -> Self {
        Self::start_with(config, target, |_| {})
    }

    /// [`HostLink::start`], with `on_change` called at every change of status.
    pub fn start_with(
        mut config: HostConfig,
        target: HostTarget,
        on_change: impl FnMut(&HostStatus) + Send + 'static,
    ) -> Self {
        if config.identity.is_none() {
            let identity = ServerIdentity::load_or_create(&default_data_dir())
                .and_then(|identity| TlsServer::new(&identity));
            match identity {
                Ok(identity) => config.identity = Some(identity),
                Err(err) => tracing::warn!(
                    %err,
                    "no TLS identity for the join-code relay's players: they speak plain through it"
                ),
            }
        }
        let (status_tx, status) = watch::channel(HostStatus::Connecting);
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(run(config, target, status_tx, Box::new(on_change), stopped));
        Self {
            status,
            stop: Some(stop),
        }
    }

    /// The status now.
    pub fn status(&self) -> HostStatus {
        self.status.borrow().clone()
    }

    /// Every change of status.
    pub fn watch(&self) -> watch::Receiver<HostStatus> {
        self.status.clone()
    }

    /// Waits for the first answer: a code, or why not.
    pub async fn ready(&mut self) -> HostStatus {
        let _ = self
            .status
            .wait_for(|s| !matches!(s, HostStatus::Connecting))
            .await;
        self.status()
    }

    /// Closes the control connection: the code ends with the relay's grace.
    pub fn stop(mut self) {
        drop(self.stop.take());
    }
}

type OnChange = Box<dyn FnMut(&HostStatus) + Send>;

/// Connects, serves, and connects again, until stopped or refused.
async fn run(
    config: HostConfig,
    target: HostTarget,
    status: watch::Sender<HostStatus>,
    mut on_change: OnChange,
    mut stop: oneshot::Receiver<()>,
) {
    let mut set = |now: HostStatus| {
        if *status.borrow() != now {
            on_change(&now);
            status.send_replace(now);
        }
    };
    let mut keep: Option<(String, Secret)> = None;
    // Attempts since the host was last registered: the wait doubles.
    let mut failed = 0;
    loop {
        let served = tokio::select! {
            served = serve(&config, &target, &mut keep, &mut set) => served,
            _ = &mut stop => return,
        };
        match served {
            Err(Ended::Refused(why)) => {
                set(HostStatus::Refused(why));
                return;
            }
            Err(Ended::Lost(why, was_ready)) => {
                if was_ready {
                    failed = 0;
                }
                set(HostStatus::Lost(why));
            }
        }
        failed += 1;
        let wait = switchboard_proto::limits::doubling(config.retry, config.max_retry, failed);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = &mut stop => return,
        }
    }
}

enum Ended {
    Refused(String),
    /// Why, and whether it had been registered (then retry at once).
    Lost(String, bool),
}

/// One control connection: register, then open a data connection for each
/// player announced, answer pings, until the connection ends.
async fn serve(
    config: &HostConfig,
    target: &HostTarget,
    keep: &mut Option<(String, Secret)>,
    set: &mut impl FnMut(HostStatus),
) -> Result<std::convert::Infallible, Ended> {
    let lost = |why: String| Ended::Lost(why, false);
    let connect = config.dialer.open_stream(&config.relay);
    let mut stream = tokio::time::timeout(config.timeout, connect)
        .await
        .map_err(|_| lost("the relay did not answer".into()))?
        .map_err(|e| lost(format!("cannot reach {}: {e}", config.relay)))?
        .into_stream();
    let hello = Frame::Host {
        version: VERSION,
        keep: keep.clone(),
    };
    stream
        .write_all(&hello.encode())
        .await
        .map_err(|e| lost(e.to_string()))?;
    let first = tokio::time::timeout(config.timeout, read_frame(&mut stream))
        .await
        .map_err(|_| lost("the relay gave no code".into()))?
        .map_err(lost)?;
    let (code, secret) = match first {
        Frame::Code { code, secret } => (code, secret),
        Frame::Refuse { reason } => return Err(Ended::Refused(reason)),
        other => return Err(lost(format!("the relay answered {other:?}"))),
    };
    *keep = Some((code.clone(), secret));
    set(HostStatus::Ready {
        code,
        relay: config.relay.clone(),
        fingerprint: config.identity.as_ref().map(TlsServer::fingerprint),
    });
    let lost = |why: String| Ended::Lost(why, true);
    let (read, mut write) = tokio::io::split(stream);
    let mut heard = FramedRead::new(read, frames(MAX_FRAME_LEN + 1));
    loop {
        let frame = tokio::time::timeout(config.silence, heard.next())
            .await
            .map_err(|_| lost("the relay went silent".into()))?;
        let frame = match frame {
            Some(Ok(bytes)) if bytes.len() > 5 => Frame::parse(&bytes[5..]),
            Some(Ok(_)) => return Err(lost("the relay sent an empty frame".into())),
            Some(Err(e)) => return Err(lost(e.to_string())),
            None => return Err(lost("the relay closed the connection".into())),
        };
        match frame {
            Ok(Frame::Ping) => {
                let pong = Frame::Ping.encode();
                write
                    .write_all(&pong)
                    .await
                    .map_err(|e| lost(e.to_string()))?;
            }
            Ok(Frame::Incoming {
                ticket,
                addr,
                websocket,
            }) => {
                let (config, target) = (config.clone(), target.clone());
                tokio::spawn(async move {
                    let player = Incoming {
                        ticket,
                        addr: &addr,
                        websocket,
                    };
                    if let Err(why) = open_data(&config, &target, secret, player).await {
                        tracing::warn!(%why, ticket, "relayed player not served");
                    }
                });
            }
            Ok(Frame::Refuse { reason }) => return Err(Ended::Refused(reason)),
            Ok(other) => return Err(lost(format!("the relay sent {other:?}"))),
            Err(e) => return Err(lost(e.to_string())),
        }
    }
}

/// A player the relay announced.
struct Incoming<'a> {
    ticket: u64,
    addr: &'a str,
    /// It came to the relay's WebSocket port: its frames are plain.
    websocket: bool,
}

/// Opens the data connection of `player` and gives it to `target`.
async fn open_data(
    config: &HostConfig,
    target: &HostTarget,
    secret: Secret,
    player: Incoming<'_>,
) -> Result<(), String> {
    let Incoming {
        ticket,
        addr,
        websocket,
    } = player;
    let player: SocketAddr = addr
        .parse()
        .map_err(|_| format!("the relay named the player {addr:?}"))?;
    let data = Frame::Data { secret, ticket }.encode();
    let mut data: Box<dyn ByteStream> = if websocket {
        // A browser's frames are plain inside: the link to the relay is
        // TLS when the relay is another machine.
        let mut stream =
            tokio::time::timeout(config.timeout, config.dialer.open_stream(&config.relay))
                .await
                .map_err(|_| "the relay did not answer".to_string())?
                .map_err(|e| e.to_string())?
                .into_stream();
        stream.write_all(&data).await.map_err(|e| e.to_string())?;
        stream
    } else {
        let mut stream =
            tokio::time::timeout(config.timeout, TcpStream::connect(config.relay.as_str()))
                .await
                .map_err(|_| "the relay did not answer".to_string())?
                .map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        stream.write_all(&data).await.map_err(|e| e.to_string())?;
        // The player's first byte: TLS, ended here (the host's own
        // identity), or plain (a client that chose plaintext).
        let opened = async {
            let mut first = [0u8; 1];
            if stream.peek(&mut first).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            Ok(match (&config.identity, first[0] == 0x16) {
                (Some(tls), true) => Box::new(tls.handshake(stream).await?) as Box<dyn ByteStream>,
                _ => Box::new(stream),
            })
        };
        tokio::time::timeout(config.timeout, opened)
            .await
            .map_err(|_| format!("{player} opened nothing in time"))?
            .map_err(|e: std::io::Error| format!("{player}'s TLS: {e}"))?
    };
    match target {
        HostTarget::Attach(attach) => {
            if !attach(data, player) {
                return Err(format!("the server turned {player} away"));
            }
        }
        HostTarget::Forward(server) => {
            let mut local = TcpStream::connect(server)
                .await
                .map_err(|e| format!("the game's server at {server}: {e}"))?;
            let _ = local.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional(&mut data, &mut local).await;
        }
    }
    Ok(())
}

/// One whole frame of the relay's (at most its frame limit).
async fn read_frame(stream: &mut (impl AsyncRead + Unpin)) -> Result<Frame, String> {
    let mut head = [0u8; 4];
    stream
        .read_exact(&mut head)
        .await
        .map_err(|_| "the relay closed the connection".to_string())?;
    let len = u32::from_be_bytes(head) as usize;
    if !(2..=MAX_FRAME_LEN + 1).contains(&len) {
        return Err(format!("the relay sent a frame of {len} bytes"));
    }
    let mut body = vec![0u8; len];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| e.to_string())?;
    Frame::parse(&body[1..]).map_err(|e| e.to_string())
}
