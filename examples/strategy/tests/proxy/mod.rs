//! A TCP proxy in front of a server whose connections a test can cut: a
//! player's line dropping, for the reconnect tests.

use std::time::Duration;

/// Relays every connection to `upstream`; [`Proxy::cut`] ends them all.
pub struct Proxy {
    pub addr: std::net::SocketAddr,
    cut: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Proxy {
    pub fn start(upstream: std::net::SocketAddr) -> Proxy {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let generation = cut.clone();
        std::thread::spawn(move || {
            for inbound in listener.incoming().map_while(Result::ok) {
                let Ok(outbound) = std::net::TcpStream::connect(upstream) else {
                    continue;
                };
                let born = generation.load(Ordering::SeqCst);
                for (mut from, mut to) in [
                    (inbound.try_clone().unwrap(), outbound.try_clone().unwrap()),
                    (outbound.try_clone().unwrap(), inbound.try_clone().unwrap()),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
                let watch = generation.clone();
                std::thread::spawn(move || {
                    while watch.load(Ordering::SeqCst) == born {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    let _ = inbound.shutdown(std::net::Shutdown::Both);
                    let _ = outbound.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Proxy { addr, cut }
    }

    /// Cuts every connection open now (a player's line dropping).
    pub fn cut(&self) {
        self.cut.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}
