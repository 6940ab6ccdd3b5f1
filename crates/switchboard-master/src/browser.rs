//! The browser's side: fetch the list from a master, then ping and query
//! each listed server directly.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;

use crate::protocol::{
    self, Datagram, Filter, ListPage, ListRequest, Listed, MasterAction, MasterChannel, ServerInfo,
    MAX_DATAGRAM, MAX_PAGE,
};
use crate::MasterStats;
use switchboard::message::Message;
use switchboard::socket::{SocketConfig, SocketStream};

/// A listed server as the browser measured it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Browsed {
    /// What the master listed.
    pub listed: Listed,
    /// The round trip of a ping, if one came back.
    pub ping: Option<Duration>,
}

pub(crate) async fn ask<T: serde::de::DeserializeOwned>(
    socket: &mut SocketStream,
    message: Message,
    timeout: Duration,
) -> std::io::Result<T> {
    let reply = socket
        .ask(&message, timeout)
        .await
        .map_err(|err| std::io::Error::new(err.kind(), format!("the master: {err}")))?;
    reply.content().map_err(std::io::Error::other)
}

/// Every server the master lists that passes `filter`, fetched page by page.
pub async fn fetch_list(
    master: SocketAddr,
    filter: Filter,
    timeout: Duration,
) -> std::io::Result<Vec<Listed>> {
    let mut socket = SocketStream::dial(master, SocketConfig::default());
    let mut servers = Vec::new();
    // A master that keeps saying "more" is not followed past this: a list
    // holds at most MAX_LISTED servers.
    for page in 0..MAX_LISTED.div_ceil(MAX_PAGE as usize) as u32 {
        let request = ListRequest {
            filter: filter.clone(),
            page,
            page_size: MAX_PAGE,
        };
        let message = Message::new(MasterChannel::Master, MasterAction::List, &request)
            .map_err(std::io::Error::other)?;
        let reply: ListPage = ask(&mut socket, message, timeout).await?;
        if reply.servers.len() > MAX_PAGE as usize {
            return Err(std::io::Error::other(
                "the master sent a page longer than asked",
            ));
        }
        let last = reply.servers.is_empty()
            || (page + 1) as usize * MAX_PAGE as usize >= reply.total as usize;
        servers.extend(reply.servers);
        if last {
            break;
        }
    }
    socket.close("done");
    Ok(servers)
}

/// The most servers a browser takes from one master's list.
pub const MAX_LISTED: usize = 10_000;

/// The master's counters.
pub async fn master_stats(master: SocketAddr, timeout: Duration) -> std::io::Result<MasterStats> {
    let mut socket = SocketStream::dial(master, SocketConfig::default());
    let message = Message::new(MasterChannel::Master, MasterAction::Stats, &())
        .map_err(std::io::Error::other)?;
    let stats = ask(&mut socket, message, timeout).await;
    socket.close("done");
    stats
}

/// Pings every server, at most `concurrency` at once, each up to `1 +
/// retries` times with `timeout` per try; returns them fastest first
/// (unreachable ones last).
pub async fn ping_servers(
    servers: Vec<Listed>,
    concurrency: usize,
    timeout: Duration,
    retries: u32,
) -> std::io::Result<Vec<Browsed>> {
    let udp = UdpSocket::bind("0.0.0.0:0").await?;
    let mut results: Vec<Browsed> = Vec::with_capacity(servers.len());
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    for chunk in servers.chunks(concurrency.max(1)) {
        let mut waiting: HashMap<SocketAddr, (u64, Instant, &Listed)> = HashMap::new();
        for attempt in 0..=retries {
            for listed in chunk {
                if attempt > 0 && !waiting.contains_key(&listed.addr) {
                    continue;
                }
                let nonce =
                    u64::from(attempt) << 32 | (results.len() as u64 + waiting.len() as u64);
                udp.send_to(&protocol::encode(&Datagram::Ping { nonce }), listed.addr)
                    .await?;
                waiting.insert(listed.addr, (nonce, Instant::now(), listed));
            }
            let deadline = tokio::time::Instant::now() + timeout;
            while !waiting.is_empty() {
                let Ok(Ok((len, from))) =
                    tokio::time::timeout_at(deadline, udp.recv_from(&mut buf)).await
                else {
                    break;
                };
                if let Ok(Datagram::Pong { nonce }) =
                    protocol::decode(&buf[..len.min(MAX_DATAGRAM)])
                {
                    if let Some((expected, sent, listed)) = waiting.get(&from) {
                        if *expected == nonce {
                            results.push(Browsed {
                                listed: (*listed).clone(),
                                ping: Some(sent.elapsed()),
                            });
                            waiting.remove(&from);
                        }
                    }
                }
            }
            if waiting.is_empty() {
                break;
            }
        }
        results.extend(waiting.into_values().map(|(_, _, listed)| Browsed {
            listed: listed.clone(),
            ping: None,
        }));
    }
    results.sort_by_key(|b| b.ping.unwrap_or(Duration::MAX));
    Ok(results)
}

/// Asks one server for its info directly (the query is padded so that the
/// server may answer a stranger).
pub async fn query_info(server: SocketAddr, timeout: Duration) -> std::io::Result<ServerInfo> {
    let udp = UdpSocket::bind("0.0.0.0:0").await?;
    let mut challenge = [0u8; 8];
    getrandom::fill(&mut challenge).map_err(|e| std::io::Error::other(e.to_string()))?;
    let challenge = u64::from_le_bytes(challenge);
    let query = protocol::encode(&Datagram::InfoQuery {
        challenge,
        padding: vec![0; MAX_DATAGRAM - 32],
    });
    udp.send_to(&query, server).await?;
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let (len, from) = tokio::time::timeout_at(deadline, udp.recv_from(&mut buf))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no info in time"))??;
        if from != server || len > MAX_DATAGRAM {
            continue;
        }
        if let Ok(Datagram::InfoReply { challenge: c, info }) = protocol::decode(&buf[..len]) {
            if c == challenge {
                return Ok(info);
            }
        }
    }
}
