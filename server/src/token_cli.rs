//! Connect tokens from the command line: `--connect-token-key-file` and
//! `--connect-token-name` make a server of a fleet ask them, and
//! `mint-token` mints one as the fleet's backend would (for a backend
//! written in another language: `docs/PROTOCOL.md`, "Connect tokens").

use std::path::{Path, PathBuf};

use clap::Args;
use switchboard::token::{ConnectToken, TokenKey, TokenRules};

/// A server's connect-token options.
#[derive(Debug, Args, Clone)]
pub(crate) struct TokenArgs {
    /// Admit new players only with a connect token sealed under the key in
    /// this file (64 hex digits, the key the fleet's backend and servers
    /// share) and naming this server (`--connect-token-name`); each token
    /// once. The token travels in the hello's credentials.
    #[arg(long, value_name = "PATH", requires = "connect_token_names")]
    connect_token_key_file: Option<PathBuf>,
    /// A name this server answers to in connect tokens (`host:port`, as the
    /// backend writes it; repeat for several).
    #[arg(long = "connect-token-name", value_name = "HOST:PORT")]
    connect_token_names: Vec<String>,
}

impl TokenArgs {
    /// The rules these options ask for (`None`: no tokens asked).
    pub(crate) fn rules(&self) -> Result<Option<TokenRules>, String> {
        let Some(path) = &self.connect_token_key_file else {
            return Ok(None);
        };
        Ok(Some(TokenRules::new(
            read_key(path)?,
            self.connect_token_names.clone(),
        )))
    }
}

/// `mint-token`: a connect token on stdout, in hex.
#[derive(Debug, Args)]
pub(crate) struct MintArgs {
    /// The key file (64 hex digits).
    #[arg(long, value_name = "PATH")]
    key_file: PathBuf,
    /// A server the token is good for (`host:port`; repeat, up to 8).
    #[arg(long = "server", value_name = "HOST:PORT", required = true)]
    servers: Vec<String>,
    /// The backend's id of the player.
    #[arg(long, default_value_t = 0)]
    client_id: u64,
    /// Seconds it stays good.
    #[arg(long, default_value_t = 300)]
    secs: u64,
    /// Up to 256 bytes (UTF-8) the game's authentication hook receives.
    #[arg(long, default_value = "")]
    user_data: String,
}

pub(crate) fn run_mint(args: MintArgs) -> Result<(), String> {
    let key = read_key(&args.key_file)?;
    let now = switchboard::session::ticket::unix_secs();
    let nonce = switchboard::session::ticket::token_nonce();
    let token = ConnectToken {
        client_id: args.client_id,
        servers: args.servers,
        expires_at: now.saturating_add(args.secs),
        user_data: args.user_data.into_bytes(),
    }
    .seal(&key, nonce)
    .map_err(|e| e.to_string())?;
    println!("{}", hex(&token));
    Ok(())
}

/// A key from its file: 64 hex digits (whitespace around them ignored).
fn read_key(path: &Path) -> Result<TokenKey, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let bytes = unhex(text.trim())
        .filter(|b| b.len() == 32)
        .ok_or_else(|| format!("{}: not a key of 64 hex digits", path.display()))?;
    let mut key = [0u8; 32];
    key.copy_from_slice(&bytes);
    Ok(TokenKey(key))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
