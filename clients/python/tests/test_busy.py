"""Players behind one address (a LAN party, a school, a carrier's NAT)
joining a real board server at once through a 50 ms path: the server, busy
with their handshakes, turns some away for now with a retry-after (close
1013, "... (retry after N ms)"), and the Python client waits that long and
joins."""

import asyncio
import unittest

from support import Netsim, WithServer
from switchboard_client.session import SessionClient, retry_after


class Busy(WithServer, unittest.IsolatedAsyncioTestCase):
    def test_a_retry_after_reads_back_from_a_close_reason(self):
        self.assertEqual(retry_after("busy (retry after 1500 ms)"), 1.5)
        self.assertIsNone(retry_after("server full"))
        self.assertIsNone(retry_after(""))

    async def test_sixty_python_players_behind_one_address_are_all_welcomed_after_waiting(self):
        with Netsim(self.server.addr, 50) as path:
            players = [SessionClient(path.addr, f"p{i}") for i in range(60)]
            welcomes = await asyncio.wait_for(asyncio.gather(*(p.connect() for p in players)), 30)
            self.assertEqual(len({w["client"] for w in welcomes}), 60, "sixty ids")
            told = sum(p.told_to_wait for p in players)
            self.assertGreater(told, 0, "some were told to come back (the server was busy)")
            for player in players:
                await player.close()


if __name__ == "__main__":
    unittest.main()
