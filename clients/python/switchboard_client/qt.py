"""The game-loop client on a Qt event loop (PySide6, PyQt6 or PyQt5, the
first installed): :class:`QtClient` is a ``QObject`` whose Qt signals carry
the client's events, emitted on the thread that owns it as soon as they
arrive (the network thread wakes the Qt loop; nothing polls on a timer).
Imperialism Remake's network layer, where channels, actions, signals and
slots come from, is PyQt; this is its shape.

    app = QCoreApplication([])
    client = QtClient("127.0.0.1:7000", "ada")
    client.welcomed.connect(lambda welcome: print(welcome["client"]))
    client.subscribe(16, 10, Line, on_line)       # slots run on the Qt thread
    app.exec()
"""

from __future__ import annotations

from typing import Any

try:
    from PySide6.QtCore import QObject, Qt
    from PySide6.QtCore import Signal as _QtSignal
except ImportError:  # pragma: no cover - whichever binding is installed
    try:
        from PyQt6.QtCore import QObject, Qt
        from PyQt6.QtCore import pyqtSignal as _QtSignal
    except ImportError:
        from PyQt5.QtCore import QObject, Qt  # type: ignore[no-redef]
        from PyQt5.QtCore import pyqtSignal as _QtSignal  # type: ignore[no-redef]

from .game import GameClient


class QtClient(QObject):
    """A :class:`~switchboard_client.game.GameClient` as a ``QObject``:
    the same signals, as Qt signals, emitted on the object's thread."""

    welcomed = _QtSignal(object)
    message = _QtSignal(object)
    connection_lost = _QtSignal(object)
    reconnecting = _QtSignal(int)
    refused = _QtSignal(object)
    disconnected = _QtSignal(object)
    error = _QtSignal(object)
    request_done = _QtSignal(int, object)
    #: Emitted from the network thread; queued to this object's thread.
    _arrived = _QtSignal()

    def __init__(self, addr: str, name: str | None = None, parent: QObject | None = None, **options: Any) -> None:
        super().__init__(parent)
        self.client = GameClient(addr, name, **options)
        for signal in (
            "welcomed",
            "message",
            "connection_lost",
            "reconnecting",
            "refused",
            "disconnected",
            "error",
            "request_done",
        ):
            getattr(self.client, signal).connect(getattr(self, signal).emit)
        self._arrived.connect(self.client.poll, Qt.ConnectionType.QueuedConnection)
        self.client.notify = self._arrived.emit
        # Whatever arrived before the wake-up was wired.
        self._arrived.emit()

    def subscribe(self, *args: Any) -> Any:
        """As :meth:`GameClient.subscribe`; the slot runs on this object's thread."""
        return self.client.subscribe(*args)

    def request(self, *args: Any) -> int:
        """As :meth:`GameClient.request`; the verdict comes as ``request_done``."""
        return self.client.request(*args)

    def send(self, *args: Any) -> None:
        self.client.send(*args)

    def status(self, ticket: int) -> Any:
        return self.client.status(ticket)

    def close(self, reason: str = "goodbye") -> None:
        self.client.close(reason)
        self.client.poll()
