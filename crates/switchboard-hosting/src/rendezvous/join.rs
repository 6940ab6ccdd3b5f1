//! A player's side of the join-code relay: `CODE@relay:port` dialed as the
//! relay wants it (its join frame first), then TLS with the host, end to
//! end inside the pipe (the relay pipes records it cannot read), then the
//! game's own protocol.

use super::frames::Frame;
use switchboard::socket::{Connector, Dialer, Opening, Transport};
use switchboard::tls::TlsClient;
use switchboard_proto::join_code::split_join_addr;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The connector for `CODE@host:port`: a game hosted through the join-code
/// relay at `host:port`.
///
/// ```no_run
/// use switchboard::{ClientConfig, NetworkClient};
/// let client = NetworkClient::connect_via(
///     switchboard_hosting::JoinCodes::dialer(),
///     "K7PQ2MXB@relay.example:7400",
///     ClientConfig::named("ann"),
/// );
/// ```
///
/// The host is checked by the dialer's trust, the address `CODE@host:port`
/// its name in the known-hosts file; pin the fingerprint the host shows
/// (`Dialer::trust(ServerTrust::pinned(..))`, the game's `--trust`) so
/// that not even the relay can pose as the host.
#[derive(Debug, Clone, Copy, Default)]
pub struct JoinCodes;

impl JoinCodes {
    /// A dialer that knows join codes besides the socket's own forms.
    pub fn dialer() -> Dialer {
        Dialer::default().with(JoinCodes)
    }
}

impl Connector for JoinCodes {
    fn accepts(&self, addr: &str) -> bool {
        split_join_addr(addr).is_some()
    }

    fn open(&self, addr: &str, tls: Option<&TlsClient>) -> Opening {
        let target = split_join_addr(addr).map(|(code, relay)| {
            let join = Frame::Join {
                code: code.to_string(),
            }
            .encode();
            (join, relay.to_string())
        });
        let (addr, tls) = (addr.to_string(), tls.cloned());
        Box::pin(async move {
            let (join, relay) = target.ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a CODE@host:port")
            })?;
            let mut stream = TcpStream::connect(relay).await?;
            let _ = stream.set_nodelay(true);
            stream.write_all(&join).await?;
            let Some(tls) = tls else {
                return Ok(stream.into());
            };
            // A relay that refused the join (in the game's words: a hello
            // and a close) where the host's TLS was due is heard: the
            // handshake's error is its close.
            let (stream, _) = tls.handshake(stream, &addr).await?;
            Ok(Transport::Stream(Box::new(stream)))
        })
    }
}
