"""The game-loop client against a real board server: signals delivered by
poll() on the caller's thread, in order, nothing lost while a frame runs
late; verdicts as signals and by ticket; a reconnect keeps the id."""

import threading
import time
import unittest

from support import WithServer
from switchboard_client.bincode import STRING, U8, UNIT
from switchboard_client.game import ACCEPTED, PENDING, GameClient
from switchboard_client.session import RequestRejected
from test_session import BOARD, CLAIM, LINE, RELEASE, SAY, Line


def poll_until(clients, check, what, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not check():
        for client in clients:
            client.poll()
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not in time")
        time.sleep(0.005)


class GameLoop(WithServer, unittest.TestCase):
    def test_signals_come_from_poll_on_the_game_thread_in_order_and_none_is_lost(self):
        ada, bob = GameClient(self.server.addr, "ada"), GameClient(self.server.addr, "bob")
        welcomes, lines, threads = [], [], set()
        ada.welcomed.connect(welcomes.append)
        bob.welcomed.connect(welcomes.append)
        bob.subscribe(BOARD, LINE, Line, lambda line: (lines.append(line["text"]), threads.add(threading.current_thread())))
        poll_until([ada, bob], lambda: len(welcomes) == 2, "two welcomes")
        tickets = [ada.request(BOARD, SAY, STRING, f"line {i}") for i in range(20)]
        # A long frame: nothing polled while the lines arrive.
        time.sleep(0.5)
        self.assertEqual(lines, [], "slots run only in poll()")
        poll_until([ada, bob], lambda: len(lines) == 20, "twenty lines")
        self.assertEqual(lines, [f"line {i}" for i in range(20)])
        self.assertEqual(threads, {threading.main_thread()})
        self.assertTrue(all(ada.status(t) == ACCEPTED for t in tickets))
        ada.close()
        bob.close()

    def test_a_rejected_request_comes_back_with_its_reason(self):
        ada = GameClient(self.server.addr, "ada")
        done = []
        ada.request_done.connect(lambda ticket, verdict: done.append((ticket, verdict)))
        poll_until([ada], lambda: ada.client_id is not None, "welcome")
        ticket = ada.request(BOARD, RELEASE, UNIT, None)
        self.assertEqual(ada.status(ticket), PENDING)
        poll_until([ada], lambda: done, "the verdict")
        self.assertEqual(done[0][0], ticket)
        self.assertIsInstance(done[0][1], RequestRejected)
        self.assertEqual(done[0][1].reason, "you have no seat")
        self.assertIs(ada.status(ticket), done[0][1])
        ada.close()

    def test_a_dropped_connection_comes_back_with_the_same_id(self):
        ada = GameClient(self.server.addr, "ada")
        heard = []
        for signal in (ada.welcomed, ada.connection_lost, ada.reconnecting):
            signal.connect(lambda value, name=signal.name: heard.append((name, value)))
        poll_until([ada], lambda: ada.client_id is not None, "welcome")
        first = ada.client_id
        seated = ada.request(BOARD, CLAIM, U8, 5)
        poll_until([ada], lambda: ada.status(seated) == ACCEPTED, "the seat")
        ada.drop()
        poll_until([ada], lambda: sum(name == "welcomed" for name, _ in heard) == 2, "the second welcome")
        names = [name for name, _ in heard]
        self.assertEqual(names[:3], ["welcomed", "connection_lost", "reconnecting"])
        self.assertEqual(ada.client_id, first)
        self.assertTrue(heard[-1][1]["resumed"])
        ada.close()


if __name__ == "__main__":
    unittest.main()
