"""A Python player joins a game hosted behind a join-code relay: a real
``switchboard-server rendezvous`` and a board server linked to it."""

import unittest

from support import Server
from switchboard_client.bincode import U8
from switchboard_client.connection import join_frame, split_join
from switchboard_client.session import RequestRejected, SessionClient

BOARD, CLAIM = 16, 4


class JoinCode(unittest.IsolatedAsyncioTestCase):
    def test_the_join_frame_is_the_bytes_protocol_md_shows(self):
        self.assertEqual(join_frame("K7PQ2M"), b"\x00\x00\x00\x0b\x00SWJNK7PQ2M")
        self.assertEqual(split_join("K7PQ2M@relay:7400"), ("K7PQ2M", "relay:7400"))
        self.assertEqual(split_join("127.0.0.1:7000"), (None, "127.0.0.1:7000"))

    async def test_a_python_player_joins_by_code_and_the_hosts_rules_answer(self):
        with Server("rendezvous") as relay:
            pattern = r"^join-code relay: join code (\w+):"
            with Server("--rendezvous", relay.addr, expect=pattern) as board:
                code = board.expected.group(1)
                ada = SessionClient(f"{code}@{relay.addr}", "ada")
                bob = SessionClient(f"{code.lower()}@{relay.addr}", "bob")
                await ada.connect()
                await bob.connect()
                await ada.request(BOARD, CLAIM, U8, 2)
                with self.assertRaises(RequestRejected) as taken:
                    await bob.request(BOARD, CLAIM, U8, 2)
                self.assertEqual(taken.exception.reason, "seat 2 is taken")
                await ada.close()
                await bob.close()
        with Server("rendezvous") as relay:
            stranger = SessionClient(f"ZZZZZZ@{relay.addr}", "eve")
            with self.assertRaises(Exception) as refused:
                await stranger.connect()
            self.assertIn("no game has the join code", str(refused.exception))
