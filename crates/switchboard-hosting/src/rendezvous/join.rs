//! A player's side of the join-code relay: `CODE@relay:port` dialed as the
//! relay wants it (its join frame first), then the game's own protocol
//! through the pipe.

use switchboard::socket::{Connector, Dialer, Opening};
use switchboard_proto::rendezvous::{split_join_addr, Frame};
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

    fn open(&self, addr: &str) -> Opening {
        let target = split_join_addr(addr).map(|(code, relay)| {
            let join = Frame::Join {
                code: code.to_string(),
            }
            .encode();
            (join, relay.to_string())
        });
        Box::pin(async move {
            let (join, relay) = target.ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a CODE@host:port")
            })?;
            let mut stream = TcpStream::connect(relay).await?;
            stream.write_all(&join).await?;
            Ok(stream.into())
        })
    }
}
