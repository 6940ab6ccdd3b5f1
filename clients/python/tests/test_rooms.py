"""Rooms against a real ``switchboard-server rooms``: a Python host, a
native Rust player and a JavaScript player in one room, each greeting the
others by RPC; and the refusals with their reasons."""

import asyncio
import pathlib
import subprocess
import unittest

from support import WithServer, example, reap, until
from switchboard_client.bincode import STRING, decode, encode
from switchboard_client.rooms import RoomClient
from switchboard_client.session import RequestRejected, SessionClient

HERE = pathlib.Path(__file__).resolve().parent


async def player(server, name):
    session = SessionClient(server.addr, name)
    await session.connect()
    return RoomClient(session)




class Guest:
    """A player process whose stdout lines are gathered as they come."""

    def __init__(self, command):
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines = []

    async def read(self):
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, self.process.stdout.readline):
            self.lines.append(line.strip())

    def stop(self):
        self.process.stdin.close()
        reap(self.process)


class Rooms(WithServer, unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        # Starting the guest processes blocks the loop a little: not a bug.
        asyncio.get_running_loop().slow_callback_duration = 2.0

    server_args = ("rooms", "--ws-port", "0")

    async def test_python_rust_and_javascript_players_share_a_room_and_greet_each_other(self):
        py = await player(self.server, "pyra")
        calls = []
        py.on("rpc", calls.append)
        room = await py.create("mixed", max_players=4, metadata={"map": "dunes"})
        self.assertEqual(room["metadata"], {"map": "dunes"})
        self.assertTrue(room["players"][0]["host"])
        rust = Guest([str(example("switchboard-rooms", "room_guest")), self.server.addr, str(room["id"]), "rusty"])
        node = ["node", "--experimental-websocket", "--no-warnings", str(HERE / "js_guest.mjs")]
        js = Guest([*node, self.server.ws, str(room["id"]), "jsy"])
        readers = [asyncio.ensure_future(g.read()) for g in (rust, js)]
        try:
            await until(lambda: len(py.room["players"]) == 3, "three players in the room")
            names = sorted(p["name"] for p in py.room["players"].values())
            self.assertEqual(names, ["jsy", "pyra", "rusty"])
            # Their greetings reach Python, stamped with who sent them.
            await until(lambda: len(calls) == 2, "two greetings")
            by_name = {p["id"]: p["name"] for p in py.room["players"].values()}
            greetings = sorted((by_name[c["from"]], decode(STRING, c["args"])) for c in calls)
            self.assertEqual(greetings, [("jsy", "hello from jsy"), ("rusty", "hello from rusty")])
            # Python's greeting reaches both, stamped with Python's id.
            await py.rpc("greet", "Others", encode(STRING, "hello from pyra"))
            line = f"rpc {py.session.client} greet hello from pyra"
            await until(lambda: line in rust.lines and line in js.lines, "python's greeting")
        finally:
            for guest in (rust, js):
                guest.stop()
            await asyncio.wait(readers, timeout=5)
            await py.session.close()

    async def test_a_full_room_refuses_with_the_reason_and_a_started_one_too(self):
        ann, bob, cat = [await player(self.server, n) for n in ("ann", "bob", "cat")]
        room = await ann.create("pair", max_players=2)
        await bob.join(room["id"])
        with self.assertRaises(RequestRejected) as full:
            await cat.join(room["id"])
        self.assertIn("full", full.exception.reason)
        solo = await cat.create("solo", max_players=4)
        await cat.ready(True)
        await cat.start()
        await ann.leave()
        with self.assertRaises(RequestRejected) as started:
            await ann.join(solo["id"])
        self.assertIn("started", started.exception.reason)
        for p in (ann, bob, cat):
            await p.session.close()


if __name__ == "__main__":
    unittest.main()
