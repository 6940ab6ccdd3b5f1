//! A registry that goes down and comes back: the master's log hears of the
//! outage once and of its end once, with how many calls failed, however
//! many calls fail in between (before: a warning per call).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchboard_master::{
    Filter, Heard, Limits, ListPage, ListRequest, Listed, Master, MasterConfig, MemoryRegistry,
    Registry, RegistryError, ServerInfo, Upserted,
};

/// A memory registry that fails every call while `down`.
#[derive(Default)]
struct Flaky {
    inner: MemoryRegistry,
    down: bool,
}

impl Flaky {
    fn check(&self) -> Result<(), RegistryError> {
        match self.down {
            true => Err(RegistryError("redis unavailable: broken pipe".into())),
            false => Ok(()),
        }
    }
}

impl Registry for Flaky {
    async fn heartbeat(
        &mut self,
        addr: SocketAddr,
        now: Instant,
        limits: Limits,
    ) -> Result<Heard, RegistryError> {
        self.check()?;
        self.inner.heartbeat(addr, now, limits).await
    }
    async fn upsert(
        &mut self,
        addr: SocketAddr,
        info: ServerInfo,
        now: Instant,
        limits: Limits,
    ) -> Result<Upserted, RegistryError> {
        self.check()?;
        self.inner.upsert(addr, info, now, limits).await
    }
    async fn remove(&mut self, addr: SocketAddr) -> Result<bool, RegistryError> {
        self.check()?;
        self.inner.remove(addr).await
    }
    async fn expire(&mut self, now: Instant, expiry: Duration) -> Result<usize, RegistryError> {
        self.check()?;
        self.inner.expire(now, expiry).await
    }
    async fn query(&mut self, request: &ListRequest) -> Result<ListPage, RegistryError> {
        self.check()?;
        self.inner.query(request).await
    }
    async fn matching(
        &mut self,
        filter: &Filter,
        max: usize,
    ) -> Result<Vec<Listed>, RegistryError> {
        self.check()?;
        self.inner.matching(filter, max).await
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
}

/// The log's lines, shared with the subscriber.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn registry_outage_is_logged_once_and_its_end_once_with_the_count() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _log = tracing::subscriber::set_default(subscriber);

    let mut master = Master::new(MasterConfig::default(), Flaky::default());
    let now = Instant::now();
    master.tick(now).await;
    master.registry_mut().down = true;
    for i in 0..20 {
        master.tick(now + Duration::from_secs(i)).await;
    }
    assert_eq!(master.stats().registry_errors, 20, "every failure counted");
    master.registry_mut().down = false;
    master.tick(now + Duration::from_secs(30)).await;
    master.tick(now + Duration::from_secs(31)).await;

    let log = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    assert_eq!(
        log.lines().filter(|l| l.contains(": unavailable")).count(),
        1,
        "{log}"
    );
    assert_eq!(log.matches("reachable again").count(), 1, "{log}");
    assert!(log.contains("failed_calls=20"), "{log}");
}
