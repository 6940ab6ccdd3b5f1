//! The connection to Redis, its key names and its time limits.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use switchboard::session::Outage;
use tokio::sync::watch;

/// Where Redis is and how long to wait for it; each field says its default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// The server, as `redis://[:password@]host[:port][/db]` (default
    /// `redis://127.0.0.1:6379/`).
    pub url: String,
    /// Every key starts with this and a colon (default `switchboard`), so
    /// that several services can share one Redis.
    pub prefix: String,
    /// A call that gets no answer within this long fails (default 500 ms):
    /// a slow Redis delays a heartbeat or a listing by at most this.
    pub response_timeout: Duration,
    /// A connection attempt that does not complete within this long fails
    /// (default 500 ms); the next call tries again.
    pub connect_timeout: Duration,
    /// A master's list of servers is read from Redis at most this often
    /// (default 1 s); list requests in between are answered from it, so a
    /// browser's hundred pages cost Redis one read.
    pub list_cache: Duration,
    /// A game's checkpoint is kept this long after its last save (default
    /// 24 h): a game abandoned mid-way does not stay in Redis for ever.
    pub checkpoint_ttl: Duration,
    /// How often a process checks that Redis still holds its state
    /// (default 250 ms; [`RedisStore::restarts`]): after an outage, or a
    /// restart that lost the data, what it owns is written again at once.
    pub probe_interval: Duration,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            url: "redis://127.0.0.1:6379/".into(),
            prefix: "switchboard".into(),
            response_timeout: Duration::from_millis(500),
            connect_timeout: Duration::from_millis(500),
            list_cache: Duration::from_secs(1),
            checkpoint_ttl: Duration::from_secs(24 * 3600),
            probe_interval: Duration::from_millis(250),
        }
    }
}

/// Redis could not be reached or did not answer in time, or answered
/// something this crate did not write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The URL does not parse.
    #[error("redis url {url:?} is not valid: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// Why.
        reason: String,
    },
    /// Down, refused, timed out, or an error reply.
    #[error("redis unavailable: {0}")]
    Unavailable(String),
    /// A value under our keys that does not decode.
    #[error("redis holds a value that does not decode: {0}")]
    Corrupt(String),
    /// A name given for a key (a game's) that this crate does not take.
    #[error("not a valid name: {0}")]
    InvalidName(String),
}

/// A connection to Redis shared by every user in a process (cheap to
/// clone). It connects on first use and again after Redis restarts.
#[derive(Clone)]
pub struct RedisStore {
    connection: ConnectionManager,
    config: RedisConfig,
    /// The restart watch, started on first need and shared by clones.
    restarts: Arc<OnceLock<watch::Receiver<u64>>>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// A store for `config`; it does not connect until first used, so a
    /// process can start while Redis is down. Its connection runs on the
    /// current tokio runtime, or outside one on Switchboard's background
    /// runtime (`switchboard::runtime`).
    pub fn open(config: RedisConfig) -> Result<Self, StoreError> {
        let runtime = switchboard::runtime::handle();
        let _inside = runtime.enter();
        let url_error = |err: redis::RedisError| StoreError::Url {
            url: config.url.clone(),
            reason: err.to_string(),
        };
        let client = redis::Client::open(config.url.as_str()).map_err(url_error)?;
        // One quick retry: callers have their own deadline, and a request
        // should fail fast rather than wait out a long backoff.
        let manager = ConnectionManagerConfig::new()
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(config.connect_timeout)
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(Some(config.response_timeout));
        let connection =
            ConnectionManager::new_lazy_with_config(client, manager).map_err(url_error)?;
        crate::calls::opened();
        Ok(Self {
            connection,
            config,
            restarts: Arc::default(),
        })
    }

    /// A count that goes up each time Redis comes back after an outage or
    /// is found to have lost its data (restarted empty, flushed): then
    /// every owner of state in it writes that state again. One probe task
    /// per store (and its clones), every `probe_interval`: a marker key
    /// holds a value chosen by the first process to find it missing; a
    /// process that finds another value there than it saw last knows Redis
    /// lost everything. Each outage and each loss is logged once.
    pub fn restarts(&self) -> watch::Receiver<u64> {
        self.restarts
            .get_or_init(|| {
                let (tx, rx) = watch::channel(0);
                // The probe's own copy of the connection, without this
                // watch: the probe ends once every store and receiver is
                // gone, instead of keeping itself alive.
                let probe = RedisStore {
                    connection: self.connection.clone(),
                    config: self.config.clone(),
                    restarts: Arc::default(),
                };
                let _inside = switchboard::runtime::handle().enter();
                tokio::spawn(probe_restarts(probe, tx));
                rx
            })
            .clone()
    }

    /// The settings.
    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// `prefix:part`, the name of one of our keys.
    pub fn key(&self, part: impl std::fmt::Display) -> String {
        format!("{}:{part}", self.config.prefix)
    }

    /// Runs `call` on the connection, within the response timeout; counted
    /// in [`calls`](crate::calls()).
    pub async fn run<T, F, Fut>(&self, call: F) -> Result<T, StoreError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        // The connection manager's own timeout covers one request; this
        // also covers a reconnect in progress.
        let deadline = self.config.response_timeout + self.config.connect_timeout;
        let started = tokio::time::Instant::now();
        let result = match tokio::time::timeout(deadline, call(self.connection.clone())).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(StoreError::Unavailable(err.to_string())),
            Err(_) => Err(StoreError::Unavailable(format!(
                "no answer within {deadline:?}"
            ))),
        };
        crate::calls::count(started.elapsed(), result.is_err());
        result
    }

    /// Whether Redis answers now.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.run(|mut c| async move { redis::cmd("PING").query_async::<String>(&mut c).await })
            .await
            .map(drop)
    }
}

/// KEYS: the marker. ARGV: a fresh value. The marker's value (this one if it
/// was missing).
const MARK: &str = r#"
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
"#;

/// The restart watch's task: ends when every receiver is gone.
async fn probe_restarts(store: RedisStore, epoch: watch::Sender<u64>) {
    let key = store.key("incarnation");
    let script = redis::Script::new(MARK);
    let mut seen: Option<String> = None;
    let mut outage = Outage::new("Redis");
    let mut every =
        tokio::time::interval(store.config.probe_interval.max(Duration::from_millis(10)));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !epoch.is_closed() {
        every.tick().await;
        let fresh = crate::service::to_hex(&switchboard::session::ticket::nonce());
        let mut call = script.prepare_invoke();
        call.key(&key).arg(fresh);
        let marked: Result<String, StoreError> = store
            .run(|mut c| async move { call.invoke_async(&mut c).await })
            .await;
        match marked {
            Err(err) => {
                outage.failed(&err);
            }
            Ok(value) => {
                let came_back = outage.succeeded().is_some();
                let lost = seen.as_ref().is_some_and(|old| *old != value);
                if lost {
                    tracing::warn!(
                        "Redis lost its data (restarted empty?): writing our state again"
                    );
                }
                if lost || came_back {
                    epoch.send_modify(|n| *n += 1);
                }
                seen = Some(value);
            }
        }
    }
}
