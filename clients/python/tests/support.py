"""Real servers for the tests: the ``switchboard-server`` binary of this
workspace (built by ``cargo test --workspace``; built here when missing, or
``SWITCHBOARD_SERVER`` names another), started on a free port and stopped
after the test."""

from __future__ import annotations

import asyncio
import os
import pathlib
import re
import subprocess
import threading

ROOT = pathlib.Path(__file__).resolve().parents[3]
BINARY = pathlib.Path(os.environ.get("SWITCHBOARD_SERVER", ROOT / "target" / "debug" / "switchboard-server"))


class Server:
    """``switchboard-server ARGS`` on loopback and a free port; ``addr`` is
    "127.0.0.1:PORT", ``ws`` its WebSocket URL (with ``--ws-port``),
    ``admin`` its admin server's URL (with ``--admin-port``); with
    ``expect``, ``expected`` is the match of the first line that matches
    that pattern."""

    def __init__(self, *args: str, env: dict | None = None, expect: str | None = None, bind: str = "loopback") -> None:
        if not BINARY.exists():
            subprocess.run(["cargo", "build", "-q", "-p", "switchboard-server"], cwd=ROOT, check=True)
        env = {**os.environ, "RUST_LOG": "warn", "SWITCHBOARD_PASSWORD": "", **(env or {})}
        self.process = subprocess.Popen(
            [str(BINARY), *args, "--bind", bind, "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        self.port = self.ws = self.admin = self.expected = None
        want_ws, want_admin = "--ws-port" in args, "--admin-port" in args
        for line in self.process.stdout:
            line = line.strip()
            if ready := re.match(r"^SWITCHBOARD READY \d+ (\d+)$", line):
                self.port = int(ready.group(1))
            if ws := re.match(r"^WebSocket clients: (wss?://\S+)$", line):
                self.ws = ws.group(1)
            if admin := re.match(r"^admin: (http://[^/]+)", line):
                self.admin = admin.group(1)
            if expect and self.expected is None:
                self.expected = re.match(expect, line)
            if self.port and (self.ws or not want_ws) and (self.admin or not want_admin) and (self.expected or not expect):
                break
        if self.port is None:
            self.stop()
            raise RuntimeError("the server never printed its ready line")
        # Whatever it prints later must not fill the pipe and stall it.
        threading.Thread(target=self._drain, daemon=True).start()
        self.addr = f"127.0.0.1:{self.port}"

    def _drain(self) -> None:
        try:
            self.process.stdout.read()
        except (OSError, ValueError):
            pass

    def stop(self) -> None:
        self.process.terminate()
        reap(self.process)

    def kill(self) -> None:
        """Kills it outright (SIGKILL): no goodbye, no last write."""
        self.process.kill()
        self.process.wait()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


class Netsim(Server):
    """A delayed path to ``to`` ("host:port"): ``switchboard-server netsim``
    with ``latency_ms`` each way, no jitter, no stalls; ``addr`` is where
    to connect through it. Every connection through it comes from one
    address to the server, as players behind one NAT do."""

    def __init__(self, to: str, latency_ms: int) -> None:  # noqa: D107
        self.process = subprocess.Popen(
            [str(BINARY), "netsim", "--to", to, "--latency-ms", str(latency_ms), "--jitter-ms", "0", "--stall-every-ms", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "RUST_LOG": "warn"},
            text=True,
        )
        ready = re.match(r"^SWITCHBOARD READY \d+ (\d+)$", self.process.stdout.readline().strip())
        if ready is None:
            self.stop()
            raise RuntimeError("netsim never printed its ready line")
        threading.Thread(target=self._drain, daemon=True).start()
        self.addr = f"127.0.0.1:{ready.group(1)}"


def example(package: str, name: str) -> pathlib.Path:
    """A Rust example of the workspace (built by ``cargo test``; here when
    missing)."""
    path = ROOT / "target" / "debug" / "examples" / name
    if not path.exists():
        subprocess.run(["cargo", "build", "-q", "-p", package, "--example", name], cwd=ROOT, check=True)
    return path


class Redis:
    """A real ``redis-server`` (Debian's package; scripts/install-test-deps
    installs it) on a free port, without persistence; ``url`` for the
    servers, ``command`` to ask it something."""

    def __init__(self) -> None:
        import socket
        import time

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{self.port}/"
        deadline = time.monotonic() + 10
        while True:
            try:
                if self.command("PING").startswith("+PONG"):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError("redis-server did not start (install Debian's redis-server)")
            time.sleep(0.02)

    def command(self, *args: str) -> str:
        """One command; Redis's raw reply (":1\\r\\n")."""
        import socket

        request = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
            conn.sendall(request.encode())
            return conn.recv(65536).decode()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def reap(process: subprocess.Popen) -> None:
    """Waits for ``process`` to end (killing it after 10 s) and closes its
    stdout."""
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


async def until(check, what: str, seconds: float = 15.0) -> None:
    """Waits (on the event loop) until ``check()`` holds; fails naming
    ``what``."""
    for _ in range(int(seconds * 100)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{what}: not in time")


class WithServer:
    """A test case mixin: one server for the whole class, started from
    ``server_args`` (and ``server_env``) before its first test and stopped
    after its last."""

    server_args: tuple = ()
    server_env: dict | None = None

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.server = Server(*cls.server_args, env=cls.server_env)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()
        super().tearDownClass()
