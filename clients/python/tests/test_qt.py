"""The Qt adapter on a real Qt event loop, against a real board server:
signals emitted on the Qt thread as events arrive. Skipped, with the reason,
when no Qt binding (PySide6, PyQt6, PyQt5) is installed."""

import threading
import unittest

from support import WithServer
from switchboard_client.bincode import STRING, UNIT
from switchboard_client.session import RequestRejected
from test_session import BOARD, LINE, RELEASE, SAY, Line

try:
    from switchboard_client.qt import QtClient

    try:
        from PySide6.QtCore import QCoreApplication, QTimer
    except ImportError:
        try:
            from PyQt6.QtCore import QCoreApplication, QTimer
        except ImportError:
            from PyQt5.QtCore import QCoreApplication, QTimer
    QT = None
except ImportError as err:
    QT = f"no Qt binding installed (pip install PySide6-Essentials): {err}"


@unittest.skipIf(QT, QT)
class QtLoop(WithServer, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.app = QCoreApplication.instance() or QCoreApplication([])

    def run_until(self, check, what, ms=10000):
        timer = QTimer()
        timer.setInterval(5)
        timer.timeout.connect(lambda: check() and self.app.quit())
        timer.start()
        QTimer.singleShot(ms, self.app.quit)
        self.app.exec()
        timer.stop()
        self.assertTrue(check(), f"{what}: not in time")

    def test_signals_arrive_on_the_qt_thread_as_they_come(self):
        ada, bob = QtClient(self.server.addr, "ada"), QtClient(self.server.addr, "bob")
        welcomes, lines, threads, verdicts = [], [], set(), []
        ada.welcomed.connect(welcomes.append)
        bob.welcomed.connect(welcomes.append)

        def heard(line):
            lines.append(line["text"])
            threads.add(threading.current_thread())

        bob.subscribe(BOARD, LINE, Line, heard)
        ada.request_done.connect(lambda ticket, verdict: verdicts.append((ticket, verdict)))
        self.run_until(lambda: len(welcomes) == 2, "two welcomes")
        ada.request(BOARD, SAY, STRING, "hello from qt")
        rejected = ada.request(BOARD, RELEASE, UNIT, None)
        self.run_until(lambda: lines and len(verdicts) == 2, "the line and two verdicts")
        self.assertEqual(lines, ["hello from qt"])
        self.assertEqual(threads, {threading.main_thread()})
        verdict = dict(verdicts)[rejected]
        self.assertIsInstance(verdict, RequestRejected)
        self.assertEqual(verdict.reason, "you have no seat")
        ada.close()
        bob.close()


if __name__ == "__main__":
    unittest.main()
