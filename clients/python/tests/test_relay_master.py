"""The relay and the master against real servers: transforms both ways
between a Python player and a native Rust bot, the operator's notice; the
master's list with a board server registered on it, filtered."""

import asyncio
import json
import unittest
import urllib.request

from support import Server, WithServer, until
from switchboard_client.master import server_list
from switchboard_client.relay import RelayClient

TOKEN = "python-relay-test-token"




def admin(server, path, body):
    request = urllib.request.Request(
        f"{server.admin}{path}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


class Relay(WithServer, unittest.IsolatedAsyncioTestCase):
    server_args = ("relay", "--admin-port", "0")
    server_env = {"SWITCHBOARD_ADMIN_TOKEN": TOKEN}

    async def test_transforms_cross_between_a_python_player_and_a_native_bot(self):
        py = await RelayClient.connect(self.server.addr, name="python")
        self.assertGreater(py.id, 0)
        me = [80.0, 0.0, 20.0]

        async def keep_moving():
            while True:
                py.move(me, zone="py-zone")
                await asyncio.sleep(0.1)

        mover = asyncio.ensure_future(keep_moving())
        try:
            # A bot that follows the nearest player, started by the operator.
            self.assertEqual(admin(self.server, "/api/bots", {"count": 1, "script": "follow", "place": "py-zone"}), 200)
            await until(lambda: len(py.players) == 1, "the bot in the zone")
            (bot,) = py.players
            self.assertNotEqual(bot, py.id)
            # It walks to 5 units behind us on x: it heard our transforms.
            await until(lambda: abs(py.players[bot]["transform"]["position"][0] - (me[0] - 5)) < 1, "the bot following us")
            relayed = py.players[bot]
            self.assertEqual(relayed["transform"]["zone"], "py-zone")
            self.assertGreater(relayed["server_time_ms"], 0)
        finally:
            mover.cancel()
            await py.close()

    async def test_a_compact_python_player_sees_a_plain_one_to_the_centimetre(self):
        plain = await RelayClient.connect(self.server.addr, name="plain")
        compact = await RelayClient.connect(self.server.addr, name="compact", compact=True)
        steps = 0

        async def keep_moving():
            nonlocal steps
            while True:
                steps += 1
                plain.move([10 + steps * 0.25, 0.0, 5.0], rotation=[0.0, 90.0, 0.0], zone="cz", extra={"emote": '"wave"'})
                compact.move([20.0, 1.5, 5.0], zone="cz")
                await asyncio.sleep(0.05)

        mover = asyncio.ensure_future(keep_moving())
        try:
            await until(lambda: plain.id in compact.players and compact.id in plain.players, "both in view")
            seen = steps
            await until(lambda: compact.players[plain.id]["transform"]["position"][0] > 10 + seen * 0.25, "the plain one moving")
            heard = compact.players[plain.id]["transform"]
            self.assertEqual((heard["zone"], heard["rotation"], heard["extra"]), ("cz", [0.0, 90.0, 0.0], {"emote": '"wave"'}))
            self.assertEqual(heard["position"][2], 5.0)
            self.assertEqual(plain.players[compact.id]["transform"]["position"], [20.0, 1.5, 5.0])
            left = []
            compact.on("left", left.append)
            mover.cancel()
            gone = plain.id
            await plain.close()
            await until(lambda: left == [gone], "the plain one's leaving")
        finally:
            mover.cancel()
            await plain.close()
            await compact.close()

    async def test_a_notice_from_the_operator_reaches_the_python_player(self):
        py = await RelayClient.connect(self.server.addr, name="python")
        notices = []
        py.on("notice", notices.append)
        self.assertEqual(admin(self.server, "/api/notice", {"text": "restart in 5 minutes"}), 200)
        await until(lambda: notices, "the notice")
        self.assertEqual(notices, ["restart in 5 minutes"])
        await py.close()


class Master(unittest.IsolatedAsyncioTestCase):
    async def test_the_masters_list_shows_a_registered_server_and_filters(self):
        with Server("master") as master:
            args = ["--register-with", master.addr, "--name", "python's board", "--heartbeat-secs", "1"]
            with Server(*args) as board:
                found = []

                async def listed():
                    found[:] = await server_list(master.addr)
                    return any(s["addr"] == board.addr for s in found)

                for _ in range(100):
                    if await listed():
                        break
                    await asyncio.sleep(0.1)
                entry = next((s for s in found if s["addr"] == board.addr), None)
                self.assertIsNotNone(entry, f"listed: {found}")
                self.assertEqual(entry["info"]["name"], "python's board")
                game_type = entry["info"]["game_type"]
                self.assertEqual(len(await server_list(master.addr, {"game_type": game_type})), len(found))
                self.assertEqual(await server_list(master.addr, {"game_type": "no such game"}), [])


if __name__ == "__main__":
    unittest.main()
