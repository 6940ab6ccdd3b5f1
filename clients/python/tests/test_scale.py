"""Two board servers sharing a real Redis (docs/SCALING.md): the server a
Python client plays on is killed outright, and the client resumes on the
other, its fallback, with its id."""

import asyncio
import unittest

from support import Redis, Server, until
from switchboard_client.bincode import STRING
from switchboard_client.session import SessionClient
from test_session import BOARD, SAY


class Scale(unittest.IsolatedAsyncioTestCase):
    async def test_a_client_whose_server_is_killed_resumes_on_its_fallback_with_its_id(self):
        redis = Redis()
        a = Server("--redis", redis.url, "--grace-secs", "30")
        b = Server("--redis", redis.url, "--grace-secs", "30")
        try:
            ada = SessionClient(a.addr, "ada", fallback_servers=[b.addr])
            welcomes = []

            async def follow():
                async for event in ada.events():
                    if event.kind == "welcome":
                        welcomes.append(event.value)

            follower = asyncio.ensure_future(follow())
            first = await ada.connect()
            await ada.request(BOARD, SAY, STRING, "on a")
            # The server writes the session to Redis just after its welcome;
            # once it is there, the server is killed outright.
            key = f"switchboard:session:{first['client']}"
            await until(lambda: redis.command("EXISTS", key).startswith(":1"), "the session in Redis")
            a.kill()
            await until(lambda: len(welcomes) == 2, "the welcome on the other server", 20)
            self.assertEqual(welcomes[1]["client"], first["client"], "the same id")
            self.assertTrue(welcomes[1]["resumed"])
            self.assertEqual(ada.servers[ada.target], b.addr, "on the fallback")
            await ada.request(BOARD, SAY, STRING, "on b")
            await ada.close()
            await follower
        finally:
            a.stop()
            b.stop()
            redis.stop()


if __name__ == "__main__":
    unittest.main()
