//! How every Switchboard server runs and stops, whatever it serves (a game
//! through `ServerManager`, the relay, the master): started by its builder
//! on the background runtime as a [`Running`], which reads like the
//! server's handle and whose `shutdown` is awaited (or `shutdown_blocking`
//! from plain `main`) and gives back what the server returns: the game's
//! logic, or the panic that stopped it, as an error.

use std::future::Future;
use std::net::SocketAddr;

use crate::runtime;
use crate::socket::BindScope;

/// Where a server listens: which interfaces and which port. Every server's
/// builder holds one and sets it the same way (`bind(scope)`, `port(port)`,
/// or `listen(options)` for both), so that a command line read once
/// starts any server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenOptions {
    /// Which interfaces (default loopback: this machine only).
    pub scope: BindScope,
    /// The port (default 0: a free one, read from the server's handle).
    pub port: u16,
}

impl Default for ListenOptions {
    fn default() -> Self {
        Self {
            scope: BindScope::Loopback,
            port: 0,
        }
    }
}

impl ListenOptions {
    /// On `scope`, port `port`.
    pub fn new(scope: BindScope, port: u16) -> Self {
        Self { scope, port }
    }

    /// The address to bind.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.scope.ip(), self.port)
    }
}

/// The setters every server's builder has for where it listens, over its
/// `listen: ListenOptions` field: `bind(scope)` (default loopback),
/// `port(port)` (documented by the argument: which port it is, and where a
/// free one is read), and `listen(options)` for both at once.
#[macro_export]
macro_rules! listen_setters {
    ($port_doc:literal) => {
        /// Which interfaces to listen on (default loopback: nothing outside
        /// this machine reaches it unless asked).
        pub fn bind(mut self, scope: $crate::socket::BindScope) -> Self {
            self.listen.scope = scope;
            self
        }

        #[doc = $port_doc]
        pub fn port(mut self, port: u16) -> Self {
            self.listen.port = port;
            self
        }

        /// Where to listen, both at once (a command line's `--bind` and
        /// `--port`, read once for any server).
        pub fn listen(mut self, listen: $crate::lifecycle::ListenOptions) -> Self {
            self.listen = listen;
            self
        }
    };
}

/// A TCP listener on `addr`, registered with the background runtime (or the
/// current one): what a builder's `build` binds, from code that is not
/// async. The error names the address.
pub fn tcp_listener(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let named =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"));
    let listener = std::net::TcpListener::bind(addr).map_err(named)?;
    listener.set_nonblocking(true)?;
    let _entered = runtime::handle().enter();
    tokio::net::TcpListener::from_std(listener)
}

/// A server's cloneable handle, as far as stopping goes: asks it to stop
/// gracefully and returns at once.
pub trait StopHandle: Clone + Send + Sync + 'static {
    /// Asks the server to stop.
    fn stop(&self);
}

/// A server running on a runtime: its handle (what `Deref` reaches) and
/// its task, whose output `shutdown` returns. Dropping it without a
/// shutdown asks the server to stop, without waiting.
#[derive(Debug)]
pub struct Running<H: StopHandle, T> {
    handle: H,
    task: Option<tokio::task::JoinHandle<T>>,
}

impl<H: StopHandle, T> std::ops::Deref for Running<H, T> {
    type Target = H;

    fn deref(&self) -> &H {
        &self.handle
    }
}

impl<H: StopHandle, T: Send + 'static> Running<H, T> {
    /// A running server: its handle and the task that serves (a builder's
    /// `spawn` makes it).
    pub fn new(handle: H, task: tokio::task::JoinHandle<T>) -> Self {
        Self {
            handle,
            task: Some(task),
        }
    }

    /// A running server: its handle, and `serving` (the server's run, till
    /// its handle stops it) spawned on the background runtime (or the
    /// current one). What every builder's `spawn` ends with.
    pub fn spawn(handle: H, serving: impl Future<Output = T> + Send + 'static) -> Self {
        Self::new(handle, runtime::handle().spawn(serving))
    }

    /// A clone of its handle (for other tasks and threads).
    pub fn handle(&self) -> H {
        self.handle.clone()
    }

    /// Stops the server gracefully (each says what that means: a manager
    /// flushes what was queued for each client within its
    /// `shutdown_timeout`) and returns what it gave back, or the panic that
    /// stopped it.
    pub async fn shutdown(mut self) -> Result<T, ServerError> {
        self.handle.stop();
        match self.task.take() {
            Some(task) => finish(task).await,
            None => Err(ServerError::Gone),
        }
    }

    /// [`shutdown`](Self::shutdown) from plain `main` or a test: waits on
    /// this thread. Outside any tokio runtime only (inside one, await
    /// `shutdown`): there it asks the server to stop and returns
    /// [`ServerError::WouldBlock`].
    pub fn shutdown_blocking(self) -> Result<T, ServerError> {
        if !runtime::may_block() {
            self.handle.stop();
            return Err(ServerError::WouldBlock);
        }
        runtime::handle().block_on(self.shutdown())
    }
}

impl<H: StopHandle, T> Drop for Running<H, T> {
    fn drop(&mut self) {
        if self.task.is_some() {
            self.handle.stop();
        }
    }
}

/// Awaits a server's task: its output, or why there is none.
pub(crate) async fn finish<T>(
    task: impl Future<Output = Result<T, tokio::task::JoinError>>,
) -> Result<T, ServerError> {
    match task.await {
        Ok(output) => Ok(output),
        Err(err) if err.is_panic() => {
            let payload = err.into_panic();
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Err(ServerError::Panicked(text))
        }
        Err(_) => Err(ServerError::Gone),
    }
}

/// Why a server gave nothing back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// It could not start: the port is taken, the runtime or stdout failed.
    #[error("server could not start: {0}")]
    Io(#[from] std::io::Error),
    /// The game's logic (or the server itself) panicked; it stopped there.
    #[error("the server panicked: {0}")]
    Panicked(String),
    /// Its task was cancelled (the runtime it ran on went away).
    #[error("the server's task is gone")]
    Gone,
    /// `shutdown_blocking` was called inside a tokio runtime; the server
    /// was asked to stop, but nothing waited for it.
    #[error("shutdown_blocking inside a tokio runtime: await shutdown() instead")]
    WouldBlock,
}
