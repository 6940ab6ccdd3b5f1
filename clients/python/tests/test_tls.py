"""TLS against a real board server bound beyond loopback: the server's own
self-signed key pinned by its fingerprint (as the server printed it), a
man in the middle with another key refused, a plain server answering a TLS
client found out."""

import tempfile
import unittest

from support import Server
from switchboard_client.connection import ConnectionConfig
from switchboard_client.session import SessionClient


def pinned(fingerprint: str) -> dict:
    """A session's options: TLS (the test's server is on this machine),
    the server pinned, no second attempt."""
    return {"connection": ConnectionConfig(tls=True, trust=fingerprint), "reconnect": False}


class Tls(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = tempfile.TemporaryDirectory()
        cls.server = Server("--data-dir", cls.data.name, bind="all", expect=r"^tls: sha256 ([0-9a-f]{64})$")
        cls.fingerprint = cls.server.expected.group(1)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.data.cleanup()

    async def test_a_pinned_python_client_joins_over_tls(self):
        ada = SessionClient(self.server.addr, "ada", **pinned(self.fingerprint))
        welcome = await ada.connect()
        self.assertEqual(len(welcome["token"]), 32)
        await ada.close()

    async def test_a_man_in_the_middle_with_another_key_is_refused(self):
        eve = SessionClient(self.server.addr, "eve", **pinned("ab" * 32))
        with self.assertRaises(ConnectionError) as refused:
            await eve.connect()
        self.assertIn("not the pinned", str(refused.exception))
        self.assertIn(self.fingerprint, str(refused.exception))

    async def test_a_plain_server_answering_a_tls_client_is_found_out(self):
        with Server() as plain:
            bob = SessionClient(plain.addr, "bob", **pinned(self.fingerprint))
            with self.assertRaises(ConnectionError) as refused:
                await bob.connect()
            self.assertIn("TLS", str(refused.exception))


if __name__ == "__main__":
    unittest.main()
