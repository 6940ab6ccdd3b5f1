//! The client of Agones's allocator service (gRPC over mutual TLS): a
//! matchmaker asks it for a game server of a fleet for each new match, and
//! hands the players its address.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

use crate::AgonesError;

/// The allocator service's messages and client (`allocation`).
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod proto {
    tonic::include_proto!("allocation");
}

use proto::allocation_service_client::AllocationServiceClient;
use proto::game_server_selector::GameServerState;
use proto::{AllocationRequest, CounterSelector, GameServerSelector, MetaPatch};

/// Where the allocator is and how to prove who we are to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatorConfig {
    /// The allocator service (`https://HOST:PORT`: the
    /// `agones-allocator` Service's external address).
    pub url: String,
    /// The CA the allocator's certificate is checked against (PEM file: the
    /// `allocator-tls-ca` Secret's `tls-ca.crt`).
    pub ca: PathBuf,
    /// This client's certificate (PEM file), signed by a CA the allocator
    /// trusts (its `allocator-client-ca` Secret).
    pub cert: PathBuf,
    /// This client's private key (PEM file).
    pub key: PathBuf,
    /// The name the allocator's certificate carries, when it is not the
    /// URL's host.
    pub server_name: Option<String>,
    /// The namespace of the fleet (default `default`).
    pub namespace: String,
    /// The fleet to allocate from (default `switchboard-rooms`).
    pub fleet: String,
    /// How long an allocation may take before the match is refused
    /// (default 5 s).
    pub timeout: Duration,
}

impl AllocatorConfig {
    /// The allocator at `url`, with these PEM files, for the default
    /// namespace and fleet.
    pub fn new(url: impl Into<String>, ca: PathBuf, cert: PathBuf, key: PathBuf) -> Self {
        Self {
            url: url.into(),
            ca,
            cert,
            key,
            server_name: None,
            namespace: "default".into(),
            fleet: "switchboard-rooms".into(),
            timeout: Duration::from_secs(5),
        }
    }
}

/// A game server allocated to a match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocatedServer {
    /// The GameServer's name.
    pub name: String,
    /// The node's address.
    pub address: String,
    /// Its ports by the Fleet's names (`game`, `websocket`, `quic`).
    pub ports: BTreeMap<String, u16>,
}

impl AllocatedServer {
    /// `HOST:PORT` of the port named `name`.
    pub fn addr(&self, name: &str) -> Option<String> {
        let port = self.ports.get(name)?;
        Some(if self.address.contains(':') {
            format!("[{}]:{port}", self.address)
        } else {
            format!("{}:{port}", self.address)
        })
    }
}

/// A client of the allocator service. Cheap to clone; connects when first
/// used (and again after the allocator restarts).
#[derive(Debug, Clone)]
pub struct Allocator {
    client: AllocationServiceClient<Channel>,
    config: AllocatorConfig,
}

impl Allocator {
    /// Reads the PEM files and prepares the mutual-TLS channel. Must be
    /// called inside a tokio runtime.
    pub fn new(config: AllocatorConfig) -> Result<Self, AgonesError> {
        let read = |path: &PathBuf| {
            std::fs::read(path)
                .map_err(|e| AgonesError::Allocator(format!("{}: {e}", path.display())))
        };
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(read(&config.ca)?))
            .identity(Identity::from_pem(read(&config.cert)?, read(&config.key)?));
        if let Some(name) = &config.server_name {
            tls = tls.domain_name(name.clone());
        }
        let bad =
            |e: tonic::transport::Error| AgonesError::Allocator(format!("{}: {e}", config.url));
        let channel = Channel::from_shared(config.url.clone())
            .map_err(|e| AgonesError::Allocator(format!("{}: {e}", config.url)))?
            .tls_config(tls)
            .map_err(bad)?
            .connect_timeout(config.timeout)
            .timeout(config.timeout)
            .connect_lazy();
        Ok(Self {
            client: AllocationServiceClient::new(channel),
            config,
        })
    }

    /// Allocates a game server of the fleet for a match labelled `labels`
    /// (`switchboard.dev/scenario`, say): one already Allocated with a
    /// room free first (matches packed onto running servers), else a
    /// Ready one.
    pub async fn allocate(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Result<AllocatedServer, AgonesError> {
        let fleet: std::collections::HashMap<_, _> =
            [("agones.dev/fleet".to_string(), self.config.fleet.clone())].into();
        let with_room = GameServerSelector {
            match_labels: fleet.clone(),
            game_server_state: GameServerState::Allocated as i32,
            counters: [(
                crate::lifecycle::ROOMS.to_string(),
                CounterSelector {
                    min_available: 1,
                    ..CounterSelector::default()
                },
            )]
            .into(),
            ..GameServerSelector::default()
        };
        let ready = GameServerSelector {
            match_labels: fleet,
            game_server_state: GameServerState::Ready as i32,
            ..GameServerSelector::default()
        };
        let request = AllocationRequest {
            namespace: self.config.namespace.clone(),
            game_server_selectors: vec![with_room, ready],
            metadata: Some(MetaPatch {
                labels: labels.clone().into_iter().collect(),
                annotations: Default::default(),
            }),
            ..AllocationRequest::default()
        };
        let answer = self
            .client
            .clone()
            .allocate(request)
            .await
            .map_err(|status| match status.code() {
                tonic::Code::ResourceExhausted => AgonesError::NoServerFree,
                _ => AgonesError::Allocator(status.message().to_string()),
            })?
            .into_inner();
        Ok(AllocatedServer {
            name: answer.game_server_name,
            address: answer.address,
            ports: answer
                .ports
                .into_iter()
                .filter_map(|p| Some((p.name, u16::try_from(p.port).ok()?)))
                .collect(),
        })
    }
}
