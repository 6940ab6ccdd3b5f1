//! A real `redis-server` for tests: started on a free loopback port with no
//! persistence, stopped and started again on the same port, killed when
//! dropped. Debian's package `redis-server` provides it
//! (`scripts/install-test-deps` installs it when missing).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` process of the test's own.
#[derive(Debug)]
pub struct RedisProcess {
    child: Option<Child>,
    port: u16,
}

impl RedisProcess {
    /// Starts one on a free port and waits until it answers PING.
    pub fn start() -> std::io::Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut redis = Self { child: None, port };
        redis.restart()?;
        Ok(redis)
    }

    /// Its URL, for [`RedisConfig::url`](crate::RedisConfig::url).
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A store on it with the default settings (connects on first use).
    pub fn store(&self) -> crate::RedisStore {
        let config = crate::RedisConfig {
            url: self.url(),
            ..crate::RedisConfig::default()
        };
        crate::RedisStore::open(config).expect("a valid URL")
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Kills it (what it held is gone: no persistence).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes it (SIGSTOP): connections stay open and nothing answers, as
    /// a Redis that is overloaded or swapping.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets a frozen one go on (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status();
        }
    }

    /// Starts it again on the same port (stopping it first if it runs).
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.stop();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| {
                std::io::Error::new(
                    err.kind(),
                    format!(
                        "cannot start redis-server ({err}); install Debian's redis-server \
                         (scripts/install-test-deps does)"
                    ),
                )
            })?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.answers() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop();
        Err(std::io::Error::other(format!(
            "redis-server on port {} did not answer within 10 s",
            self.port
        )))
    }

    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200))
        else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let mut reply = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        self.stop();
    }
}
