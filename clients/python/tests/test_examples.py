"""The examples run as a player would run them, against real servers: the
terminal board client, and the pygame relay client (without a screen;
skipped, with the reason, when pygame is not installed)."""

import asyncio
import importlib.util
import os
import pathlib
import subprocess
import sys
import unittest

import switchboard_client
from support import Server
from switchboard_client.relay import RelayClient

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
# The examples import the package the tests import (the installed one).
PACKAGE = str(pathlib.Path(switchboard_client.__file__).resolve().parents[1])
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([PACKAGE, os.environ.get("PYTHONPATH", "")])}


def run_example(name, *args, stdin="", extra_env=None):
    env = {**ENV, **(extra_env or {})}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


class Examples(unittest.TestCase):
    def test_the_terminal_board_client_says_claims_sets_and_hears_the_reasons(self):
        with Server() as server:
            done = run_example("board.py", server.addr, "ada", stdin="say hi there\nrelease\nclaim 2\nset colour blue\n")
        self.assertEqual(done.returncode, 0, done.stderr)
        lines = done.stdout.splitlines()
        for expected in ("* welcome, ada", "ada: hi there", "release: you have no seat", "* seats: {2: 'ada'}", "* ada set colour = blue", "* disconnected: quit"):
            self.assertIn(expected, lines)

    @unittest.skipIf(importlib.util.find_spec("pygame") is None, "pygame is not installed (pip install pygame)")
    def test_the_pygame_relay_client_sees_another_player_without_a_screen(self):
        with Server("relay") as server:

            async def watch():
                other = await RelayClient.connect(server.addr, name="watcher")
                seen = []
                other.on("relayed", lambda r: seen.append(r["transform"]["position"]))
                other.move([10.0, 0.0, 10.0], zone="pyg")
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    str(EXAMPLES / "relay_pygame.py"),
                    server.addr,
                    "gamer",
                    "pyg",
                    "--frames",
                    "90",
                    stdout=asyncio.subprocess.PIPE,
                    env={**ENV, "SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy"},
                )
                out, _ = await asyncio.wait_for(proc.communicate(), 60)
                await other.close()
                return proc.returncode, out.decode(), seen

            code, out, seen = asyncio.run(watch())
        self.assertEqual(code, 0, out)
        self.assertIn("gamer", out)
        self.assertIn("saw 1 other players in pyg", out)
        self.assertTrue(seen, "the pygame player's transforms reached the watcher")
        self.assertEqual(seen[0], [50.0, 0.0, 37.5], "it stands in the middle of the world")


if __name__ == "__main__":
    unittest.main()
