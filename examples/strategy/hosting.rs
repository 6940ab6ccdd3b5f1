//! The host's side of port mapping: a mapper per port, its news for the
//! player's log and lobby, the mappings removed when the game ends and on
//! Ctrl-C.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use switchboard_hosting::{PortMapConfig, PortMapper};

/// The ports a hosted game keeps forwarded.
#[derive(Default)]
pub(crate) struct Mapping {
    mappers: Arc<Mutex<Vec<PortMapper>>>,
}

impl Mapping {
    /// Starts a mapper for each `(what, port)`. Each change of status comes
    /// as a line on the receiver ("game port 7100: reachable at ...").
    pub(crate) fn start(
        config: PortMapConfig,
        ports: &[(&'static str, u16)],
    ) -> (mpsc::Receiver<String>, Self) {
        let (news, reach) = mpsc::channel();
        let mappers = ports
            .iter()
            .map(|&(what, port)| {
                let news = news.clone();
                PortMapper::start_with(config.clone(), port, move |status| {
                    let _ = news.send(format!("{what} port {port}: {status}"));
                })
            })
            .collect();
        let mapping = Self {
            mappers: Arc::new(Mutex::new(mappers)),
        };
        mapping.stop_on_ctrl_c();
        (reach, mapping)
    }

    /// Removes every mapping, saying what became of each.
    pub(crate) fn stop(self) {
        stop_all(&self.mappers);
    }

    /// Ctrl-C (in the typed interface; the full-screen one reads it as a
    /// key) removes the mappings before the process ends: a router keeps
    /// a mapping left behind until its lease ends, an hour.
    fn stop_on_ctrl_c(&self) {
        let mappers = self.mappers.clone();
        let watcher = std::thread::Builder::new()
            .name("ctrl-c".into())
            .spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                if runtime.block_on(tokio::signal::ctrl_c()).is_ok() {
                    stop_all(&mappers);
                    std::process::exit(130);
                }
            });
        if let Err(e) = watcher {
            eprintln!("port mapping: Ctrl-C will not remove it ({e})");
        }
    }
}

fn stop_all(mappers: &Mutex<Vec<PortMapper>>) {
    let taken = std::mem::take(&mut *mappers.lock().unwrap_or_else(|e| e.into_inner()));
    for mapper in taken {
        println!("port mapping: {}", mapper.stop());
    }
}
