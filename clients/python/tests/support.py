"""Real servers for the tests: the ``switchboard-server`` binary of this
workspace (built by ``cargo test --workspace``; built here when missing, or
``SWITCHBOARD_SERVER`` names another), started on a free port and stopped
after the test."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import threading

ROOT = pathlib.Path(__file__).resolve().parents[3]
BINARY = pathlib.Path(os.environ.get("SWITCHBOARD_SERVER", ROOT / "target" / "debug" / "switchboard-server"))


class Server:
    """``switchboard-server ARGS`` on loopback and a free port; ``addr`` is
    "127.0.0.1:PORT"."""

    def __init__(self, *args: str) -> None:
        if not BINARY.exists():
            subprocess.run(["cargo", "build", "-q", "-p", "switchboard-server"], cwd=ROOT, check=True)
        env = {**os.environ, "RUST_LOG": "warn", "SWITCHBOARD_PASSWORD": ""}
        self.process = subprocess.Popen(
            [str(BINARY), *args, "--bind", "loopback", "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        self.port = None
        for line in self.process.stdout:
            ready = re.match(r"^SWITCHBOARD READY \d+ (\d+)$", line.strip())
            if ready:
                self.port = int(ready.group(1))
                break
        if self.port is None:
            self.stop()
            raise RuntimeError("the server never printed its ready line")
        # Whatever it prints later must not fill the pipe and stall it.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()
        self.addr = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
