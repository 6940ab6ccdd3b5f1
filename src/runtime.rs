//! Where network tasks run.
//!
//! Inside a tokio runtime, Switchboard spawns its tasks on that runtime. A game
//! with a plain frame loop has none, so the first network object created
//! outside a runtime starts a small background runtime (two worker threads
//! named `switchboard-io`) that lives as long as the process.
//!
//! A game that blocks a *current-thread* runtime's only thread in its frame
//! loop starves its own network tasks: call network constructors outside the
//! runtime, or use a multi-thread runtime.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

static BACKGROUND: OnceLock<Runtime> = OnceLock::new();

/// The runtime network tasks are spawned on: the current one if the caller is
/// inside a tokio runtime, else the background runtime.
pub fn handle() -> Handle {
    Handle::try_current().unwrap_or_else(|_| background().handle().clone())
}

/// The process-wide background runtime, started on first use.
pub(crate) fn background() -> &'static Runtime {
    BACKGROUND.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("switchboard-io")
            .enable_all()
            .build()
            .expect("cannot start the switchboard-io runtime (out of threads?)")
    })
}

/// Whether the calling thread may block waiting for network events: not from
/// inside an async context.
pub(crate) fn may_block() -> bool {
    Handle::try_current().is_err()
}
