//! [`LocalServer`]: the game's server as a child process.
//!
//! The parent starts a program (the game's own executable, or a named server
//! binary such as `switchboard-server`) with `SWITCHBOARD_CHILD=1` and the bind
//! scope and port in its environment. The child, in [`serve_if_child`], binds,
//! prints one ready line on stdout, and serves until its stdin reaches EOF
//! (the parent asked it to stop, or died, even by SIGKILL), a `shutdown` line
//! arrives on stdin, or it gets SIGTERM / Ctrl-C. Its log lines go to stderr,
//! which the parent forwards into its own `tracing`.
//!
//! ```text
//! parent                                   child
//!   spawn(env SWITCHBOARD_CHILD=1) ───────▶ bind
//!   read stdout   ◀── "SWITCHBOARD READY <protocol> <port>"
//!   ...play...
//!   "shutdown\n", close stdin ───────────▶ graceful shutdown, exit 0
//!   wait (kill after shutdown_timeout)
//! ```

mod child;
mod limits;
mod parent;

#[cfg(feature = "stderr-log")]
pub use child::init_stderr_logging;
pub(crate) use child::watch_parent;
pub use child::{serve_if_child, wait_for_signal};
pub use limits::{raise_open_files_limit, share_descriptors, OpenFiles};
pub use parent::{ListingTagger, LocalServer, LocalServerOptions, ServerProgram, SpawnError};

use crate::PROTOCOL_VERSION;

/// Set in the child's environment: "you are a Switchboard server".
pub const ENV_CHILD: &str = "SWITCHBOARD_CHILD";
/// `loopback` or `all`.
pub const ENV_BIND: &str = "SWITCHBOARD_BIND";
/// The port to bind, 0 for any.
pub const ENV_PORT: &str = "SWITCHBOARD_PORT";
/// The join password, if any.
pub const ENV_PASSWORD: &str = "SWITCHBOARD_PASSWORD";
/// The first word of the ready line.
pub const READY_PREFIX: &str = "SWITCHBOARD READY";

/// The line a server prints once it listens on `port`.
pub fn ready_line(port: u16) -> String {
    format!("{READY_PREFIX} {PROTOCOL_VERSION} {port}")
}

/// `SWITCHBOARD READY <protocol> <port>` → Ok(port), or Err(their protocol).
/// The ready line may follow other output that did not end its line.
fn parse_ready(line: &str) -> Option<Result<u16, u16>> {
    let at = line.find(READY_PREFIX)?;
    let rest = &line[at + READY_PREFIX.len()..];
    let mut words = rest.split_whitespace();
    let protocol: u16 = words.next()?.parse().ok()?;
    let port: u16 = words.next()?.parse().ok()?;
    Some(if protocol == PROTOCOL_VERSION {
        Ok(port)
    } else {
        Err(protocol)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line_round_trips() {
        assert_eq!(parse_ready(&ready_line(4242)), Some(Ok(4242)));
        assert_eq!(parse_ready("SWITCHBOARD READY 99 1"), Some(Err(99)));
        assert_eq!(parse_ready("hello"), None);
        assert_eq!(parse_ready("SWITCHBOARD READY x 1"), None);
        assert_eq!(
            parse_ready("loading... SWITCHBOARD READY 1 80"),
            Some(Ok(80))
        );
    }
}
