//! A fake of Agones's allocator service: `allocation.AllocationService`
//! over gRPC with mutual TLS on loopback, handing out the game servers it
//! was given, in order, and ResourceExhausted when none is left, as the
//! allocator does when the fleet has none free. [`FakePki`] makes the
//! certificates both sides need.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic::{Request, Response, Status};

use crate::allocator::proto::allocation_response::GameServerStatusPort;
use crate::allocator::proto::allocation_service_server::{
    AllocationService, AllocationServiceServer,
};
use crate::allocator::proto::{AllocationRequest, AllocationResponse};
use crate::allocator::{AllocatedServer, AllocatorConfig};

/// PEM files for a test: a CA, the allocator's certificate (for
/// `localhost` and 127.0.0.1) and a client's, both signed by it, and a
/// stranger's client certificate signed by another CA.
#[derive(Debug, Clone)]
pub struct FakePki {
    /// The CA's certificate.
    pub ca: PathBuf,
    /// The allocator's certificate and key.
    pub server: (PathBuf, PathBuf),
    /// A client's certificate and key, signed by the CA.
    pub client: (PathBuf, PathBuf),
    /// A client's certificate and key signed by another CA.
    pub stranger: (PathBuf, PathBuf),
    /// That other CA's certificate (an allocator checked against it is an
    /// impostor).
    pub other_ca: PathBuf,
}

impl FakePki {
    /// Makes the certificates and writes them into `dir`.
    pub fn write(dir: &Path) -> Result<Self, rcgen::Error> {
        let (ca, ca_key) = authority("fake Agones CA")?;
        let (other, other_key) = authority("another CA")?;
        let write = |name: &str, pem: String| {
            let path = dir.join(name);
            std::fs::write(&path, pem).expect("a writable folder");
            path
        };
        let leaf = |names: Vec<String>, purpose, issuer: &rcgen::Certificate, key: &KeyPair| {
            let mut params = CertificateParams::new(names)?;
            params.extended_key_usages = vec![purpose];
            let own = KeyPair::generate()?;
            let cert = params.signed_by(&own, issuer, key)?;
            Ok::<_, rcgen::Error>((cert.pem(), own.serialize_pem()))
        };
        let local = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let server = leaf(local, ExtendedKeyUsagePurpose::ServerAuth, &ca, &ca_key)?;
        let client = leaf(vec![], ExtendedKeyUsagePurpose::ClientAuth, &ca, &ca_key)?;
        let stranger = leaf(
            vec![],
            ExtendedKeyUsagePurpose::ClientAuth,
            &other,
            &other_key,
        )?;
        Ok(Self {
            ca: write("ca.crt", ca.pem()),
            server: (write("server.crt", server.0), write("server.key", server.1)),
            client: (write("client.crt", client.0), write("client.key", client.1)),
            stranger: (
                write("stranger.crt", stranger.0),
                write("stranger.key", stranger.1),
            ),
            other_ca: write("other-ca.crt", other.pem()),
        })
    }
}

fn authority(name: &str) -> Result<(rcgen::Certificate, KeyPair), rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate()?;
    Ok((params.self_signed(&key)?, key))
}

/// One allocation asked of the fake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// The namespace asked in.
    pub namespace: String,
    /// The labels the match set.
    pub labels: BTreeMap<String, String>,
    /// Each selector's fleet label and state (`Ready`, `Allocated`).
    pub selectors: Vec<(String, String)>,
}

#[derive(Debug, Default)]
struct Book {
    free: Vec<AllocatedServer>,
    asked: Vec<Asked>,
}

/// The allocator service on a loopback port, with mutual TLS.
#[derive(Debug)]
pub struct FakeAllocator {
    addr: SocketAddr,
    book: Arc<Mutex<Book>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeAllocator {
    /// Serves `free` (handed out in order) with the certificates of `pki`.
    pub async fn start(pki: &FakePki, free: Vec<AllocatedServer>) -> std::io::Result<Self> {
        let identity =
            Identity::from_pem(std::fs::read(&pki.server.0)?, std::fs::read(&pki.server.1)?);
        let tls = ServerTlsConfig::new()
            .identity(identity)
            .client_ca_root(Certificate::from_pem(std::fs::read(&pki.ca)?));
        let book = Arc::new(Mutex::new(Book {
            free,
            asked: Vec::new(),
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let router = tonic::transport::Server::builder()
            .tls_config(tls)
            .map_err(std::io::Error::other)?
            .add_service(AllocationServiceServer::new(Service(book.clone())));
        let task = tokio::spawn(async move {
            if let Err(err) = router.serve_with_incoming(incoming).await {
                tracing::warn!(%err, "the fake Agones allocator stopped");
            }
        });
        Ok(Self { addr, book, task })
    }

    /// Its URL (`https://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// A client configuration for it with `pki`'s client certificate.
    pub fn config(&self, pki: &FakePki) -> AllocatorConfig {
        AllocatorConfig::new(
            self.url(),
            pki.ca.clone(),
            pki.client.0.clone(),
            pki.client.1.clone(),
        )
    }

    /// The allocations asked so far.
    pub fn asked(&self) -> Vec<Asked> {
        self.book
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .asked
            .clone()
    }
}

impl Drop for FakeAllocator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Debug)]
struct Service(Arc<Mutex<Book>>);

#[tonic::async_trait]
impl AllocationService for Service {
    async fn allocate(
        &self,
        request: Request<AllocationRequest>,
    ) -> Result<Response<AllocationResponse>, Status> {
        let request = request.into_inner();
        let mut book = self.0.lock().unwrap_or_else(|e| e.into_inner());
        book.asked.push(Asked {
            namespace: request.namespace.clone(),
            labels: request
                .metadata
                .map(|m| m.labels.into_iter().collect())
                .unwrap_or_default(),
            selectors: request
                .game_server_selectors
                .iter()
                .map(|s| {
                    let fleet = s.match_labels.get("agones.dev/fleet").cloned();
                    let state = match s.game_server_state {
                        1 => "Allocated",
                        _ => "Ready",
                    };
                    (fleet.unwrap_or_default(), state.to_string())
                })
                .collect(),
        });
        if book.free.is_empty() {
            return Err(Status::resource_exhausted(
                "there is no available GameServer to allocate",
            ));
        }
        let server = book.free.remove(0);
        Ok(Response::new(AllocationResponse {
            game_server_name: server.name,
            address: server.address,
            ports: server
                .ports
                .into_iter()
                .map(|(name, port)| GameServerStatusPort {
                    name,
                    port: i32::from(port),
                })
                .collect(),
            ..AllocationResponse::default()
        }))
    }
}
