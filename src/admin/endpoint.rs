//! What every mode's metrics say about its ports: connections open by
//! transport, and what the ports turned away.

use super::Counter;
use crate::socket::EndpointHandle;

/// The transports a connection can have come over, as metrics label them.
const TRANSPORTS: [&str; 4] = ["tcp", "websocket", "quic", "webtransport"];

/// A listening server's connections by transport
/// (`switchboard_endpoint_connections{transport=...}`), and its ports' refusals,
/// failed handshakes and QUIC Retries: the same series in every mode.
pub fn endpoint_counters(endpoint: &EndpointHandle) -> Vec<Counter> {
    let mut open = [0u64; TRANSPORTS.len()];
    for peer in endpoint.peers() {
        let Some(handle) = endpoint.peer(peer) else {
            continue;
        };
        let index = if handle.is_webtransport() {
            3
        } else if handle.is_quic() {
            2
        } else if handle.is_websocket() {
            1
        } else {
            0
        };
        open[index] += 1;
    }
    let mut counters: Vec<Counter> = TRANSPORTS
        .iter()
        .zip(open)
        .map(|(transport, n)| {
            Counter::gauge(
                "switchboard_endpoint_connections",
                "Connections open now, by the transport they came over.",
                n as f64,
            )
            .with_label("transport", transport)
        })
        .collect();
    counters.extend([
        Counter::total(
            "switchboard_endpoint_refused_total",
            "Connections turned away at accept (the caps, a busy server).",
            endpoint.refused(),
        ),
        Counter::total(
            "switchboard_endpoint_handshake_failures_total",
            "Connections that failed or ran out of time in their handshake.",
            endpoint.handshake_failures(),
        ),
        Counter::total(
            "switchboard_endpoint_quic_retries_total",
            "QUIC clients sent a Retry to prove their address first.",
            endpoint.quic_retries(),
        ),
    ]);
    counters
}
