"""AxisPy compatibility, against the real server.

A client written from the specification (../shared/compat/axispy-protocol.md),
not from AxisPy's code: it speaks what an unchanged AxisPy MultiplayerComponent
sends (one JSON object per text frame, its own uuid4 player id, join_request
first) and records what an AxisPy client would see. Each test starts
`switchboard-server rooms --axispy-port 0` and stops it.

Run: python3 tests/axispy/test_axispy.py   (needs `pip install websockets`;
.ci/run installs it). SWITCHBOARD_SERVER names another server binary.
"""

import asyncio
import json
import os
import subprocess
import sys
import time
import unittest
import urllib.request
import uuid
from pathlib import Path

import websockets

ROOT = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("SWITCHBOARD_SERVER", str(ROOT / "target" / "debug" / "switchboard-server"))
WAIT = 10.0


class Server:
    """`switchboard-server rooms` with an AxisPy port, on free ports."""

    def __init__(self, *extra, env=None):
        if not Path(BINARY).exists():
            subprocess.run(["cargo", "build", "-q", "-p", "switchboard-server"], cwd=ROOT, check=True)
        self.process = subprocess.Popen(
            [BINARY, "rooms", "--bind", "loopback", "--port", "0", "--axispy-port", "0", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "RUST_LOG": "warn", **(env or {})},
            text=True,
        )
        deadline = time.time() + 20
        self.url = None
        self.admin = None
        while self.url is None or ("--admin-port" in extra and self.admin is None):
            if time.time() > deadline:
                raise RuntimeError("the server did not start")
            line = self.process.stdout.readline()
            if line.startswith("AxisPy clients: "):
                self.url = line.split(": ", 1)[1].strip().replace("<room>", "")
            if line.startswith("admin: "):
                self.admin = line.split(": ", 1)[1].strip().rstrip("/")

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)
        self.process.stdout.close()


TOKEN = "axispy-test-token"


def admin(server, method, path, body=None):
    """One call to the server's admin API (the operator's controls)."""
    request = urllib.request.Request(
        server.admin + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        return response.read().decode()


class Client:
    """What an unchanged AxisPy client sends and sees."""

    def __init__(self, url, name, player_id=None):
        self.url = url
        self.name = name
        self.id = str(uuid.uuid4()) if player_id is None else player_id
        self.inbox = []
        self.ws = None
        self.reader = None
        self.closed = None

    async def connect(self, join=True):
        # No subprotocol is offered, as AxisPy does.
        self.ws = await websockets.connect(self.url, open_timeout=WAIT)
        self.closed = None
        self.reader = asyncio.create_task(self._read())
        if join:
            await self.send("join_request", {"player_id": self.id, "player_name": self.name}, sender=False)
        return self

    async def _read(self):
        try:
            async for frame in self.ws:
                if isinstance(frame, str):
                    message = json.loads(frame)
                    # The client's own rules: objects only, "d" must be one.
                    assert isinstance(message, dict)
                    assert "d" not in message or isinstance(message["d"], dict), frame
                    self.inbox.append(message)
        except websockets.ConnectionClosed:
            pass
        finally:
            self.closed = (self.ws.close_code, self.ws.close_reason)

    async def send(self, t, d=None, sender=True, **extra):
        message = {"t": t, "ts": time.time()}
        if sender:
            message["from"] = self.id
        if d:
            message["d"] = d
        message.update(extra)
        await self.ws.send(json.dumps(message))

    async def expect(self, t, where=lambda m: True, timeout=WAIT):
        """The first unconsumed message of type `t` that matches."""
        deadline = time.time() + timeout
        while True:
            for i, message in enumerate(self.inbox):
                if message["t"] == t and where(message):
                    return self.inbox.pop(i)
            if time.time() > deadline:
                raise AssertionError(f"{self.name}: no {t} in {[m['t'] for m in self.inbox]}")
            await asyncio.sleep(0.01)

    async def never(self, t, where=lambda m: True, within=0.5):
        await asyncio.sleep(within)
        seen = [m for m in self.inbox if m["t"] == t and where(m)]
        assert not seen, f"{self.name} got {seen}"

    async def joined(self):
        accepted = await self.expect("join_accepted")
        assert self.id in accepted["d"]["room"]["players"], accepted
        return accepted["d"]["room"]

    async def drop(self):
        """The socket dies without a close handshake (a lost network)."""
        self.ws.transport.abort()
        await self.wait_closed()

    async def wait_closed(self, timeout=WAIT):
        deadline = time.time() + timeout
        while self.closed is None:
            if time.time() > deadline:
                raise AssertionError(f"{self.name}: still open")
            await asyncio.sleep(0.01)
        return self.closed


class AxisPyTests(unittest.IsolatedAsyncioTestCase):
    def setUp(self):
        self.server = Server()

    def tearDown(self):
        self.server.stop()

    def url(self, room="", query=""):
        return f"{self.server.url}{room}{query}"

    async def pair(self, room="duel"):
        alice = await Client(self.url(room), "Alice").connect()
        await alice.joined()
        bob = await Client(self.url(room), "Bob").connect()
        await bob.joined()
        await alice.expect("player_joined", lambda m: m["d"]["player"]["id"] == bob.id)
        return alice, bob

    async def test_join_is_accepted_with_the_room_and_the_others_see_it(self):
        alice = await Client(self.url("duel"), "Alice").connect()
        room = await alice.joined()
        self.assertEqual(room["name"], "duel")
        me = room["players"][alice.id]
        self.assertEqual(set(me), {"id", "name", "client_id", "is_host", "is_ready", "custom_data"})
        self.assertEqual((me["name"], me["is_ready"], me["custom_data"]), ("Alice", False, {}))
        self.assertEqual(alice.inbox[:1], [], "join_accepted is the first message")
        bob = await Client(self.url("duel"), "Bob").connect()
        room = await bob.joined()
        self.assertEqual(set(room["players"]), {alice.id, bob.id})
        joined = await alice.expect("player_joined")
        self.assertEqual(joined["d"]["player"]["name"], "Bob")
        await bob.never("player_joined", lambda m: m["d"]["player"]["id"] == bob.id)

    async def test_the_room_comes_from_the_path_or_the_query(self):
        a = await Client(self.url("", "?room=hall"), "A").connect()
        self.assertEqual((await a.joined())["name"], "hall")
        b = await Client(self.url("hall"), "B").connect()
        self.assertEqual(set((await b.joined())["players"]), {a.id, b.id})
        c = await Client(self.url(), "C").connect()
        self.assertEqual((await c.joined())["name"], "Lobby")

    async def test_b5_b12_ready_is_echoed_for_the_sender_only_as_a_boolean_and_the_start_follows(self):
        alice, bob = await self.pair()
        # B5: the player id in the message is ignored; B12: extra keys are not echoed.
        await alice.send("player_ready", {"player_id": bob.id, "ready": True, "evil": 1})
        echo = await alice.expect("player_ready")
        self.assertEqual(echo["d"], {"player_id": alice.id, "ready": True})
        await bob.expect("player_ready", lambda m: m["d"]["player_id"] == alice.id)
        await bob.send("player_ready", {"player_id": bob.id, "ready": 1})
        for client in (alice, bob):
            await client.expect("player_ready", lambda m: m["d"] == {"player_id": bob.id, "ready": True})
            start = await client.expect("game_start")
            self.assertNotIn("d", start)

    async def test_b7_b8_joins_after_the_start_are_refused_and_the_refused_socket_hears_nothing(self):
        alice, bob = await self.pair()
        await alice.send("player_ready", {"ready": True})
        await bob.send("player_ready", {"ready": True})
        await alice.expect("game_start")
        late = await Client(self.url("duel"), "Late").connect()
        rejected = await late.expect("join_rejected")
        self.assertEqual(rejected["d"], {"reason": "Game already started"})
        # B7/B8: refused and inert, open, and it hears nothing of the room.
        await alice.send("custom", {"channel": "chat", "payload": {"text": "hi"}})
        await late.never("custom")
        self.assertIsNone(late.closed)

    async def test_a_full_room_refuses_with_the_reason_the_client_shows(self):
        a = await Client(self.url("pair", "?max_players=2"), "A").connect()
        await a.joined()
        b = await Client(self.url("pair"), "B").connect()
        await b.joined()
        c = await Client(self.url("pair"), "C").connect()
        self.assertEqual((await c.expect("join_rejected"))["d"], {"reason": "Room is full"})

    async def test_b3_b4_spawn_update_and_despawn_reach_the_others_and_only_the_owner_moves_it(self):
        alice, bob = await self.pair()
        await alice.send(
            "rpc_call",
            {"method": "_mp_spawn_request", "target": "host",
             "args": {"prefab": "prefabs/tank.json", "owner": alice.id, "data": {"hp": 100}}},
        )
        # The requester hears its spawn too.
        for client in (alice, bob):
            spawn = await client.expect("spawn_entity")
            self.assertEqual(spawn["d"]["prefab"], "prefabs/tank.json")
            self.assertEqual(spawn["d"]["owner"], alice.id)
            self.assertEqual(spawn["d"]["data"], {"hp": 100})
        net_id = spawn["d"]["net_id"]
        await alice.send("state_update", {"net_id": net_id, "state": {"x": 1.5, "y": 2.0, "r": 0.0, "vars": {"hp": 90}}})
        update = await bob.expect("state_update")
        self.assertEqual(update["from"], alice.id)
        self.assertEqual(update["d"]["state"], {"x": 1.5, "y": 2.0, "r": 0.0, "vars": {"hp": 90}})
        await alice.never("state_update")
        # B3/B5: Bob does not own it: his update goes nowhere.
        await bob.send("state_update", {"net_id": net_id, "state": {"x": 99.0}})
        await alice.never("state_update")
        # Owners send only what changed: the others get the whole state.
        await alice.send("state_update", {"net_id": net_id, "state": {"x": 3.0}})
        update = await bob.expect("state_update")
        self.assertEqual(update["d"]["state"], {"x": 3.0, "y": 2.0, "r": 0.0, "vars": {"hp": 90}})
        # B4: Bob's despawn of Alice's entity is refused, and Bob gets it back.
        await bob.send("despawn_entity", {"net_id": net_id})
        back = await bob.expect("spawn_entity")
        self.assertEqual(back["d"]["net_id"], net_id)
        await alice.never("despawn_entity")
        # The owner's despawn reaches the others, not the owner.
        await alice.send("despawn_entity", {"net_id": net_id})
        await bob.expect("despawn_entity", lambda m: m["d"]["net_id"] == net_id)
        await alice.never("despawn_entity")

    async def test_b2_b5_rpcs_to_all_to_the_host_and_to_one_player_are_delivered_and_stamped(self):
        alice, bob = await self.pair()
        carol = await Client(self.url("duel"), "Carol").connect()
        await carol.joined()
        # "all": everyone but the sender, who ran it already; from is stamped (B5).
        await bob.send("rpc_call", {"method": "boom", "args": {"n": 1}, "target": "all"}, **{"from": alice.id})
        for client in (alice, carol):
            call = await client.expect("rpc_call")
            self.assertEqual(call["from"], bob.id)
            self.assertEqual(call["d"]["args"], {"n": 1})
            self.assertEqual(call["d"]["target"], client.id)
        await bob.never("rpc_call")
        # B2: client to client.
        await carol.send("rpc_call", {"method": "whisper", "args": {"text": "psst"}, "target": bob.id})
        call = await bob.expect("rpc_call")
        self.assertEqual((call["from"], call["d"]["method"], call["d"]["target"]), (carol.id, "whisper", bob.id))
        await alice.never("rpc_call")
        # "host": the room's host (Alice, the first) gets it with her id as the target.
        await carol.send("rpc_call", {"method": "ask", "args": {}, "target": "host"})
        call = await alice.expect("rpc_call")
        self.assertEqual((call["from"], call["d"]["target"]), (carol.id, alice.id))
        await bob.never("rpc_call")

    async def test_b1_custom_messages_reach_the_others_stamped(self):
        alice, bob = await self.pair()
        await alice.send("custom", {"channel": "chat", "payload": {"text": "Hello!"}}, **{"from": bob.id})
        custom = await bob.expect("custom")
        self.assertEqual(custom["from"], alice.id)
        self.assertEqual(custom["d"], {"channel": "chat", "payload": {"text": "Hello!"}})
        await alice.never("custom")

    async def test_b11_ping_is_answered_to_the_pinger_only_and_the_server_pings(self):
        alice, bob = await self.pair()
        await alice.send("ping", {"ts": 12.5})
        pong = await alice.expect("pong")
        self.assertEqual(pong["d"], {"ts": 12.5})
        await bob.never("pong")
        ping = await alice.expect("ping", timeout=8)
        self.assertIsInstance(ping["d"]["ts"], float)

    async def test_b10_disconnect_is_an_immediate_leave(self):
        alice, bob = await self.pair()
        await bob.send("disconnect", {"player_id": bob.id})
        left = await alice.expect("player_left", timeout=2)
        self.assertEqual(left["d"], {"player_id": bob.id, "reason": "disconnected"})

    async def test_a_lost_connection_comes_back_as_the_same_player(self):
        alice, bob = await self.pair()
        await alice.send("player_ready", {"ready": True})
        await bob.send("player_ready", {"ready": True})
        await bob.expect("game_start")
        await bob.drop()
        # The automatic reconnect: same id, same name.
        again = await Client(self.url("duel"), "Bob", player_id=bob.id).connect()
        room = await again.joined()
        self.assertEqual(set(room["players"]), {alice.id, bob.id})
        await again.expect("game_start")
        # The others saw nothing.
        await alice.never("player_left")
        await alice.never("player_joined", lambda m: m["d"]["player"]["id"] == bob.id)

    async def test_b6_malformed_ids_and_a_second_join_on_one_socket_are_refused(self):
        for bad in ("", "not-a-uuid", "AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA"):
            client = await Client(self.url("duel"), "X", player_id=bad).connect()
            self.assertEqual((await client.expect("join_rejected"))["d"], {"reason": "invalid player id"})
        alice = await Client(self.url("duel"), "Alice").connect()
        await alice.joined()
        # A second join on the same socket, under another id, changes nothing.
        other = str(uuid.uuid4())
        await alice.send("join_request", {"player_id": other, "player_name": "Eve"}, sender=False)
        bob = await Client(self.url("duel"), "Bob").connect()
        room = await bob.joined()
        self.assertEqual(set(room["players"]), {alice.id, bob.id})
        await alice.never("join_accepted")

    async def test_a_reconnect_to_a_full_room_is_the_same_player_not_room_full(self):
        alice = await Client(self.url("pair", "?max_players=2"), "Alice").connect()
        await alice.joined()
        bob = await Client(self.url("pair"), "Bob").connect()
        await bob.joined()
        await bob.drop()
        again = await Client(self.url("pair"), "Bob", player_id=bob.id).connect()
        room = await again.joined()
        self.assertEqual(set(room["players"]), {alice.id, bob.id})
        await again.never("join_rejected")

    async def test_b6_a_live_id_cannot_be_taken_over(self):
        alice = await Client(self.url("duel"), "Alice").connect()
        await alice.joined()
        thief = await Client(self.url("duel"), "Mallory", player_id=alice.id).connect()
        rejected = await thief.expect("join_rejected")
        self.assertEqual(rejected["d"], {"reason": "duplicate player id"})
        self.assertIsNone(alice.closed)

    async def test_an_id_on_a_half_open_connection_is_taken_over_after_a_silent_probe(self):
        alice = await Client(self.url("duel"), "Alice").connect()
        await alice.joined()
        # Alice's old socket stops answering anything (half-open).
        alice.reader.cancel()
        alice.ws.transport.pause_reading()
        again = await Client(self.url("duel"), "Alice", player_id=alice.id).connect()
        room = await again.joined()
        self.assertIn(alice.id, room["players"])

    async def test_b9_a_kick_closes_the_socket_and_keeps_the_id_out(self):
        self.server.stop()
        self.server = Server("--admin-port", "0", env={"SWITCHBOARD_ADMIN_TOKEN": TOKEN})
        alice, bob = await self.pair()
        clients = json.loads(admin(self.server, "GET", "/api/clients"))
        bob_id = next(c["id"] for c in clients if c["name"] == "Bob")
        admin(self.server, "POST", f"/api/clients/{bob_id}/kick", {"reason": "be nice"})
        # Bob hears his own player_left, then disconnect, then a 4xxx close (B9).
        left = await bob.expect("player_left")
        self.assertEqual(left["d"], {"player_id": bob.id, "reason": "kicked"})
        notice = await bob.expect("disconnect")
        self.assertEqual(notice["d"], {"reason": "kicked"})
        code, _ = await bob.wait_closed()
        self.assertEqual(code, 4001)
        left = await alice.expect("player_left")
        self.assertEqual(left["d"], {"player_id": bob.id, "reason": "kicked"})
        # His automatic reconnect with the same id is refused, and inert.
        again = await Client(self.url("duel"), "Bob", player_id=bob.id).connect()
        self.assertEqual((await again.expect("join_rejected"))["d"], {"reason": "kicked"})

    async def test_b13_bad_json_gets_an_error_and_floods_are_closed(self):
        alice = await Client(self.url("duel"), "Alice").connect()
        await alice.joined()
        await alice.ws.send("{not json")
        error = await alice.expect("error")
        self.assertIn("invalid JSON", error["d"]["message"])
        await alice.ws.send("[" * 10000 + "]" * 10000)
        error = await alice.expect("error")
        self.assertIn("deeper", error["d"]["message"])
        try:
            for _ in range(30):
                await alice.ws.send("[]")
        except websockets.ConnectionClosed:
            pass
        code, _ = await alice.wait_closed()
        self.assertEqual(code, 4008)


if __name__ == "__main__":
    unittest.main(verbosity=2)
