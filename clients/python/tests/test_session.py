"""Sessions against a real board server over TCP: join, a request and its
update, a rejected request with its reason, a reconnect that keeps the id
and the seat, a wrong reconnect token refused."""

import asyncio
import unittest

from support import WithServer, until
from switchboard_client.bincode import BOOL, STRING, U8, UNIT, UUID, struct
from switchboard_client.session import JoinRefused, RequestRejected, SessionClient

# The board server's protocol (server/src/board.rs).
BOARD = 16
SAY, CLAIM, RELEASE, LINE = 1, 4, 5, 10
Line = struct(**{"from": UUID, "name": STRING, "text": STRING, "private": BOOL})




class Sessions(WithServer, unittest.IsolatedAsyncioTestCase):
    async def test_a_python_client_joins_and_gets_an_id_and_a_reconnect_token(self):
        ada = SessionClient(self.server.addr, "ada")
        welcome = await ada.connect()
        self.assertRegex(welcome["client"], r"^[0-9a-f]{8}-[0-9a-f]{4}-")
        self.assertEqual(len(welcome["token"]), 32)
        self.assertFalse(welcome["resumed"])
        self.assertEqual(welcome["grace_secs"], 60)
        await ada.close()

    async def test_a_request_is_accepted_and_its_update_reaches_every_client(self):
        ada, bob = SessionClient(self.server.addr, "ada"), SessionClient(self.server.addr, "bob")
        await ada.connect()
        await bob.connect()
        heard = []
        bob.subscribe(BOARD, LINE, Line, heard.append)
        await ada.request(BOARD, SAY, STRING, "hello from python")
        await until(lambda: heard, "the line")
        self.assertEqual(heard[0]["text"], "hello from python")
        self.assertEqual(heard[0]["from"], ada.client, "the server stamps the speaker")
        self.assertEqual(heard[0]["name"], "ada")
        await ada.close()
        await bob.close()

    async def test_a_rejected_request_carries_the_reason_for_the_player(self):
        ada = SessionClient(self.server.addr, "ada")
        await ada.connect()
        with self.assertRaises(RequestRejected) as rejected:
            await ada.request(BOARD, RELEASE, UNIT, None)
        self.assertEqual(rejected.exception.reason, "you have no seat")
        await ada.request(BOARD, CLAIM, U8, 3)
        await ada.request(BOARD, RELEASE, UNIT, None)
        await ada.close()

    async def test_a_dropped_connection_reconnects_with_the_same_id_and_keeps_its_seat(self):
        ada = SessionClient(self.server.addr, "ada")
        first = await ada.connect()
        await ada.request(BOARD, CLAIM, U8, 4)
        events = []

        async def follow():
            async for event in ada.events():
                events.append(event)

        follower = asyncio.get_running_loop().create_task(follow())
        ada.drop()
        await until(lambda: sum(e.kind == "welcome" for e in events) >= 2, "the second welcome")
        kinds = [e.kind for e in events]
        self.assertEqual(kinds[0], "welcome")
        self.assertIn("lost", kinds)
        self.assertIn("reconnecting", kinds)
        again = [e.value for e in events if e.kind == "welcome"][-1]
        self.assertEqual(again["client"], first["client"])
        self.assertTrue(again["resumed"])
        self.assertNotEqual(again["token"], first["token"], "the token rotates")
        # Still seated: releasing works, a second release has no seat.
        await ada.request(BOARD, RELEASE, UNIT, None)
        with self.assertRaises(RequestRejected):
            await ada.request(BOARD, RELEASE, UNIT, None)
        await ada.close()
        await follower

    async def test_requests_made_while_the_connection_is_down_go_when_the_session_resumes_each_once(self):
        ada, bob = SessionClient(self.server.addr, "ada"), SessionClient(self.server.addr, "bob")
        await ada.connect()
        await bob.connect()
        heard = []
        bob.subscribe(BOARD, LINE, Line, lambda line: heard.append(line["text"]))
        ada.drop()
        await until(lambda: ada.connection is None or ada.connection.closed is not None, "the drop")
        # Down: kept, not refused; sent again (marked) once ada is back.
        await asyncio.gather(*(ada.request(BOARD, SAY, STRING, text) for text in ("one", "two", "three")))
        await until(lambda: len(heard) == 3, "the three lines")
        self.assertEqual(heard, ["one", "two", "three"], "each once, in order")
        await ada.close()
        await bob.close()

    async def test_a_wrong_reconnect_token_is_refused(self):
        ada = SessionClient(self.server.addr, "ada")
        welcome = await ada.connect()
        await ada.close()
        mallory = SessionClient(self.server.addr, "mallory")
        mallory.resume = {"client": welcome["client"], "token": bytes(32)}
        with self.assertRaises(JoinRefused) as refused:
            await mallory.connect()
        self.assertIn(refused.exception.code, (1, 2, 3))


if __name__ == "__main__":
    unittest.main()
