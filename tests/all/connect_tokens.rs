//! Connect tokens against a real server over loopback: a server that asks
//! them admits a new player only with a token sealed under its key, naming
//! it, unexpired and never used before; the token's user data reaches the
//! game's `authenticate`; everything else is refused with its reason, and
//! a returning player comes back with its reconnect token alone.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use switchboard::manager::JoinRequest;
use switchboard::prelude::*;
use switchboard::token::{ConnectToken, TokenKey, TokenRules};
use switchboard::ClientEvent;

channels! { enum Chan { Score = 16 } }
actions! { #[derive(Debug)] enum Score in Chan::Score { Add(u32) = 1 } }

/// Lets in only players whose credentials (the token's user data, by the
/// time the rules see them) say "vip".
struct VipsOnly;
impl GameLogic for VipsOnly {
    type Message = Score;
    type Command = u32;
    fn validate(&self, _: &Request<Score>) -> Result<u32, Rejection> {
        Ok(1)
    }
    fn apply(&mut self, _: ClientId, _: u32, _: &mut Outbox) {}
    fn authenticate(&mut self, join: &JoinRequest<'_>) -> Result<(), String> {
        match join.credentials {
            b"vip" => Ok(()),
            other => Err(format!("credentials {other:?} are not a vip's")),
        }
    }
}

const KEY: TokenKey = TokenKey([42; 32]);
const WAIT: Duration = Duration::from_secs(10);

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A token for `servers`, good for `secs` more seconds, sealed with a
/// fresh nonce under `key`.
fn mint(key: &TokenKey, servers: &[String], secs: i64, data: &[u8]) -> Vec<u8> {
    let mut nonce = [0u8; 24];
    getrandom::fill(&mut nonce).unwrap();
    ConnectToken {
        client_id: 7,
        servers: servers.to_vec(),
        expires_at: (unix_now() as i64 + secs) as u64,
        user_data: data.to_vec(),
    }
    .seal(key, nonce)
    .unwrap()
}

/// How a client with `credentials` fares: `Ok(client)` once welcomed, or
/// the reason it was refused.
fn join(addr: std::net::SocketAddr, credentials: Vec<u8>) -> Result<NetworkClient, String> {
    let config = ClientConfig {
        credentials,
        ..ClientConfig::named("ann")
    };
    let mut client = NetworkClient::connect(addr, config);
    let deadline = std::time::Instant::now() + WAIT;
    while std::time::Instant::now() < deadline {
        for event in client
            .drain_timeout(Duration::from_millis(20))
            .collect::<Vec<_>>()
        {
            match event {
                ClientEvent::Welcomed(_) => return Ok(client),
                ClientEvent::Refused(refused) => return Err(refused.to_string()),
                _ => {}
            }
        }
    }
    panic!("neither welcomed nor refused");
}

#[test]
fn a_server_asking_connect_tokens_admits_each_valid_one_once_and_refuses_the_rest() {
    let name = "game-1.example:7000".to_string();
    let config = ManagerConfig {
        connect_tokens: Some(TokenRules::new(KEY, vec![name.clone()])),
        ..ManagerConfig::default()
    };
    let server = ServerManager::builder(VipsOnly)
        .config(config)
        .spawn()
        .unwrap();
    let addr = server.local_addr();
    let me = std::slice::from_ref(&name);
    // A valid token: in, and its user data is what the game saw.
    let token = mint(&KEY, me, 60, b"vip");
    let mut ann = join(addr, token.clone()).expect("a valid token is admitted");
    // The same token again: a replay.
    let replayed = join(addr, token).unwrap_err();
    assert!(replayed.contains("used before"), "{replayed}");
    // Expired, for another server, sealed under another key, tampered,
    // absent.
    let expired = join(addr, mint(&KEY, me, -1, b"vip")).unwrap_err();
    assert!(expired.contains("expired"), "{expired}");
    let other = join(
        addr,
        mint(&KEY, &["game-2.example:7000".into()], 60, b"vip"),
    )
    .unwrap_err();
    assert!(other.contains("another server"), "{other}");
    let forged = join(addr, mint(&TokenKey([1; 32]), me, 60, b"vip")).unwrap_err();
    assert!(forged.contains("forged"), "{forged}");
    let mut tampered = mint(&KEY, me, 60, b"vip");
    let at = tampered.len() - 17;
    tampered[at] ^= 0x80;
    assert!(join(addr, tampered).unwrap_err().contains("forged"));
    let none = join(addr, Vec::new()).unwrap_err();
    assert!(none.contains("not a connect token"), "{none}");
    // A valid token whose user data the game refuses: the game decides.
    let ordinary = join(addr, mint(&KEY, me, 60, b"guest")).unwrap_err();
    assert!(ordinary.contains("not a vip"), "{ordinary}");
    // The admitted player still plays.
    let ticket = ann.request(Score::Add(1)).unwrap();
    assert_eq!(ann.wait(ticket, WAIT), RequestStatus::Accepted);
    server.shutdown_blocking().unwrap();
}
