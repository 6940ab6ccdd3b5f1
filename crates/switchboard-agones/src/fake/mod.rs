//! Agones without Kubernetes, for tests (feature `fake`): an SDK server
//! ([`FakeSdk`]) and an allocator ([`FakeAllocator`]) served from Agones's
//! own protos over real gRPC on loopback, the SDK server holding a GameServer
//! record the way Agones's sidecar does (states, labels prefixed with
//! `agones.dev/sdk-`, Lists and Counters with their capacities and errors).

// tonic's services answer with a `Status` by value, as its traits ask.
#![allow(clippy::result_large_err)]

mod allocator;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use tokio::sync::watch;
use tonic::{Request, Response, Status, Streaming};

/// The SDK's messages and services (`agones.dev.sdk`), server side.
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod proto {
    tonic::include_proto!("agones.dev.sdk");
    /// The beta SDK: Counters and Lists.
    pub mod beta {
        tonic::include_proto!("agones.dev.sdk.beta");
    }
}

pub use allocator::{Asked, FakeAllocator, FakePki};
use proto::game_server::status::{CounterStatus, ListStatus};
use proto::game_server::{ObjectMeta, Status as GsStatus};
use proto::{beta, Empty, GameServer, KeyValue};

/// The prefix Agones's SDK server gives labels and annotations a game
/// server sets.
pub const SDK_PREFIX: &str = "agones.dev/sdk-";

/// What the GameServer declares (the Fleet's template would).
#[derive(Debug, Clone, Default)]
pub struct GameServerSetup {
    /// Lists, by name, with their capacities (`players`, say).
    pub lists: Vec<(String, i64)>,
    /// Counters, by name, with their capacities (`rooms`, say).
    pub counters: Vec<(String, i64)>,
    /// The ports Agones mapped, by the Fleet's names (`game`, say).
    pub ports: Vec<(String, i32)>,
}

/// What the fake SDK server has seen so far.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// The GameServer's state: `Scheduled`, `Ready`, `Allocated`,
    /// `Reserved`, `Shutdown`.
    pub state: String,
    /// Ready calls.
    pub ready: u32,
    /// When each Health ping arrived.
    pub health: Vec<Instant>,
    /// Allocate calls (the game server's own).
    pub allocate: u32,
    /// Shutdown calls.
    pub shutdown: u32,
    /// The GameServer's labels.
    pub labels: BTreeMap<String, String>,
    /// Lists' values, by name.
    pub lists: BTreeMap<String, Vec<String>>,
    /// Counters' counts and capacities, by name.
    pub counters: BTreeMap<String, (i64, i64)>,
}

impl Seen {
    /// The longest wait between two Health pings (or since the last one,
    /// up to now) after `from`.
    pub fn longest_health_gap(&self, from: Instant) -> Duration {
        let mut last = from;
        let mut longest = Duration::ZERO;
        for &at in self.health.iter().filter(|&&at| at >= from) {
            longest = longest.max(at - last);
            last = at;
        }
        longest.max(Instant::now() - last)
    }
}

#[derive(Debug, Default)]
struct Record {
    seen: Seen,
}

/// The state both services share, and the watchers of the record.
#[derive(Debug)]
struct Shared {
    record: Mutex<Record>,
    updates: watch::Sender<GameServer>,
    /// Lists' capacities, by name.
    capacities: BTreeMap<String, i64>,
    /// The ports Agones mapped.
    ports: Vec<(String, i32)>,
    /// Ready is refused (a GameServer being deleted, say).
    refuse_ready: std::sync::atomic::AtomicBool,
}

impl Shared {
    fn change<T>(&self, change: impl FnOnce(&mut Seen) -> T) -> T {
        let mut record = self.record.lock().unwrap_or_else(|e| e.into_inner());
        let out = change(&mut record.seen);
        let server = game_server(&record.seen, &self.capacities, &self.ports);
        drop(record);
        self.updates.send_replace(server);
        out
    }

    fn seen(&self) -> Seen {
        self.record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .seen
            .clone()
    }
}

/// The GameServer record as the SDK server hands it out.
fn game_server(
    seen: &Seen,
    capacities: &BTreeMap<String, i64>,
    ports: &[(String, i32)],
) -> GameServer {
    GameServer {
        object_meta: Some(ObjectMeta {
            name: "switchboard-fake".into(),
            namespace: "default".into(),
            labels: seen.labels.clone().into_iter().collect(),
            ..ObjectMeta::default()
        }),
        spec: None,
        status: Some(GsStatus {
            state: seen.state.clone(),
            address: "127.0.0.1".into(),
            ports: ports
                .iter()
                .map(|(name, port)| proto::game_server::status::Port {
                    name: name.clone(),
                    port: *port,
                })
                .collect(),
            counters: seen
                .counters
                .iter()
                .map(|(k, &(count, capacity))| (k.clone(), CounterStatus { count, capacity }))
                .collect(),
            lists: seen
                .lists
                .iter()
                .map(|(k, values)| {
                    let capacity = capacities.get(k).copied().unwrap_or(1000);
                    (
                        k.clone(),
                        ListStatus {
                            capacity,
                            values: values.clone(),
                        },
                    )
                })
                .collect(),
            ..GsStatus::default()
        }),
    }
}

/// An Agones SDK server on loopback, as the sidecar serves it.
#[derive(Debug)]
pub struct FakeSdk {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl FakeSdk {
    /// Serves on a free loopback port, the GameServer `Scheduled`.
    pub async fn start(setup: GameServerSetup) -> std::io::Result<Self> {
        Self::start_on(0, setup).await
    }

    /// Serves on loopback port `port` (0: a free one): a sidecar restarted
    /// where the game server knows it.
    pub async fn start_on(port: u16, setup: GameServerSetup) -> std::io::Result<Self> {
        let seen = Seen {
            state: "Scheduled".into(),
            lists: setup
                .lists
                .iter()
                .map(|(name, _)| (name.clone(), Vec::new()))
                .collect(),
            counters: setup
                .counters
                .iter()
                .map(|(name, capacity)| (name.clone(), (0, *capacity)))
                .collect(),
            ..Seen::default()
        };
        let capacities = setup.lists.into_iter().collect();
        let ports = setup.ports;
        let (updates, _) = watch::channel(game_server(&seen, &capacities, &ports));
        let shared = Arc::new(Shared {
            record: Mutex::new(Record { seen }),
            updates,
            capacities,
            ports,
            refuse_ready: Default::default(),
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let router = tonic::transport::Server::builder()
            .add_service(proto::sdk_server::SdkServer::new(SdkService(
                shared.clone(),
            )))
            .add_service(beta::sdk_server::SdkServer::new(BetaService(
                shared.clone(),
            )));
        let task = tokio::spawn(async move {
            if let Err(err) = router.serve_with_incoming(incoming).await {
                tracing::warn!(%err, "the fake Agones SDK server stopped");
            }
        });
        Ok(Self { shared, addr, task })
    }

    /// The port to give a game server (`AGONES_SDK_GRPC_PORT`).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Allocates the GameServer as a GameServerAllocation with these
    /// labels and annotations would (annotations are kept among the
    /// labels: the SDK record shows both).
    pub fn allocate(&self, labels: &[(&str, &str)]) {
        self.shared.change(|seen| {
            seen.state = "Allocated".into();
            for (k, v) in labels {
                seen.labels.insert(k.to_string(), v.to_string());
            }
        });
    }

    /// Refuses every Ready from now on.
    pub fn refuse_ready(&self) {
        let refuse = &self.shared.refuse_ready;
        refuse.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// What it has seen so far.
    pub fn seen(&self) -> Seen {
        self.shared.seen()
    }

    /// Waits until `done` holds of what it has seen, up to `deadline`:
    /// `Err` with what it saw last otherwise.
    pub async fn wait_for(
        &self,
        deadline: Duration,
        done: impl Fn(&Seen) -> bool,
    ) -> Result<Seen, Seen> {
        let until = tokio::time::Instant::now() + deadline;
        let mut updates = self.shared.updates.subscribe();
        loop {
            let seen = self.seen();
            if done(&seen) {
                return Ok(seen);
            }
            // Health pings change nothing a watcher sees: look again often.
            let wake = (tokio::time::Instant::now() + Duration::from_millis(50)).min(until);
            if tokio::time::timeout_at(wake, updates.changed())
                .await
                .is_err()
                && tokio::time::Instant::now() >= until
            {
                return Err(self.seen());
            }
        }
    }
}

impl Drop for FakeSdk {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn empty() -> Response<Empty> {
    Response::new(Empty {})
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[derive(Debug)]
struct SdkService(Arc<Shared>);

#[tonic::async_trait]
impl proto::sdk_server::Sdk for SdkService {
    async fn ready(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        if self
            .0
            .refuse_ready
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return Err(Status::failed_precondition(
                "the GameServer is being deleted",
            ));
        }
        self.0.change(|seen| {
            seen.ready += 1;
            if seen.state != "Allocated" {
                seen.state = "Ready".into();
            }
        });
        Ok(empty())
    }

    async fn allocate(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        self.0.change(|seen| {
            seen.allocate += 1;
            seen.state = "Allocated".into();
        });
        Ok(empty())
    }

    async fn shutdown(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        self.0.change(|seen| {
            seen.shutdown += 1;
            seen.state = "Shutdown".into();
        });
        Ok(empty())
    }

    async fn health(&self, request: Request<Streaming<Empty>>) -> Result<Response<Empty>, Status> {
        let mut pings = request.into_inner();
        while let Some(Ok(_)) = pings.next().await {
            let mut record = self.0.record.lock().unwrap_or_else(|e| e.into_inner());
            record.seen.health.push(Instant::now());
        }
        Ok(empty())
    }

    async fn get_game_server(&self, _: Request<Empty>) -> Result<Response<GameServer>, Status> {
        Ok(Response::new(self.0.updates.borrow().clone()))
    }

    type WatchGameServerStream = BoxStream<GameServer>;

    async fn watch_game_server(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::WatchGameServerStream>, Status> {
        let updates = tokio_stream::wrappers::WatchStream::new(self.0.updates.subscribe());
        Ok(Response::new(Box::pin(updates.map(Ok))))
    }

    async fn set_label(&self, request: Request<KeyValue>) -> Result<Response<Empty>, Status> {
        let KeyValue { key, value } = request.into_inner();
        self.0.change(|seen| {
            seen.labels.insert(format!("{SDK_PREFIX}{key}"), value);
        });
        Ok(empty())
    }

    async fn set_annotation(&self, request: Request<KeyValue>) -> Result<Response<Empty>, Status> {
        // Annotations are not kept apart: a test reads them as labels.
        self.set_label(request).await
    }

    async fn reserve(&self, _: Request<proto::Duration>) -> Result<Response<Empty>, Status> {
        self.0.change(|seen| seen.state = "Reserved".into());
        Ok(empty())
    }
}

#[derive(Debug)]
struct BetaService(Arc<Shared>);

impl BetaService {
    fn counter(&self, name: &str) -> Result<beta::Counter, Status> {
        let seen = self.0.seen();
        let &(count, capacity) = seen
            .counters
            .get(name)
            .ok_or_else(|| Status::not_found(format!("counter not found: {name}")))?;
        Ok(beta::Counter {
            name: name.into(),
            count,
            capacity,
        })
    }

    fn list(&self, name: &str) -> Result<beta::List, Status> {
        let seen = self.0.seen();
        let values = seen
            .lists
            .get(name)
            .ok_or_else(|| Status::not_found(format!("list not found: {name}")))?;
        Ok(beta::List {
            name: name.into(),
            capacity: self.0.capacities.get(name).copied().unwrap_or(1000),
            values: values.clone(),
        })
    }
}

#[tonic::async_trait]
impl beta::sdk_server::Sdk for BetaService {
    async fn get_counter(
        &self,
        request: Request<beta::GetCounterRequest>,
    ) -> Result<Response<beta::Counter>, Status> {
        self.counter(&request.into_inner().name).map(Response::new)
    }

    async fn update_counter(
        &self,
        request: Request<beta::UpdateCounterRequest>,
    ) -> Result<Response<beta::Counter>, Status> {
        let update = request
            .into_inner()
            .counter_update_request
            .ok_or_else(|| Status::invalid_argument("counterUpdateRequest is required"))?;
        let name = update.name.clone();
        self.counter(&name)?;
        self.0.change(|seen| {
            let counter = seen.counters.get_mut(&name).expect("checked above");
            if let Some(capacity) = update.capacity {
                if capacity < 0 {
                    return Err(Status::out_of_range("capacity below 0"));
                }
                counter.1 = capacity;
            }
            let count = update.count.unwrap_or(counter.0) + update.count_diff;
            if count < 0 || count > counter.1 {
                return Err(Status::out_of_range(format!(
                    "count {count} out of range 0..={}",
                    counter.1
                )));
            }
            counter.0 = count;
            Ok(())
        })?;
        self.counter(&name).map(Response::new)
    }

    async fn get_list(
        &self,
        request: Request<beta::GetListRequest>,
    ) -> Result<Response<beta::List>, Status> {
        self.list(&request.into_inner().name).map(Response::new)
    }

    async fn update_list(
        &self,
        _: Request<beta::UpdateListRequest>,
    ) -> Result<Response<beta::List>, Status> {
        Err(Status::unimplemented(
            "the fake does not update whole Lists",
        ))
    }

    async fn add_list_value(
        &self,
        request: Request<beta::AddListValueRequest>,
    ) -> Result<Response<beta::List>, Status> {
        let beta::AddListValueRequest { name, value } = request.into_inner();
        let list = self.list(&name)?;
        if list.values.contains(&value) {
            return Err(Status::already_exists(format!("{value} already in {name}")));
        }
        if list.values.len() as i64 >= list.capacity {
            return Err(Status::out_of_range(format!("{name} is at capacity")));
        }
        self.0.change(|seen| {
            seen.lists.entry(name.clone()).or_default().push(value);
        });
        self.list(&name).map(Response::new)
    }

    async fn remove_list_value(
        &self,
        request: Request<beta::RemoveListValueRequest>,
    ) -> Result<Response<beta::List>, Status> {
        let beta::RemoveListValueRequest { name, value } = request.into_inner();
        self.list(&name)?;
        let removed = self.0.change(|seen| {
            let values = seen.lists.entry(name.clone()).or_default();
            let before = values.len();
            values.retain(|v| *v != value);
            values.len() != before
        });
        if !removed {
            return Err(Status::not_found(format!("{value} not in {name}")));
        }
        self.list(&name).map(Response::new)
    }
}
