"""Qt-style signals and slots for game loops (pygame, a Qt application, a
plain ``while`` loop): the session runs on a background thread's asyncio
loop, and :meth:`GameClient.poll`, called once a frame, delivers everything
that arrived since as signals, on the caller's thread, in order. Nothing is
lost when a frame runs late: events wait (in order) for the next poll.

    client = GameClient("127.0.0.1:7000", "ada")
    client.welcomed.connect(lambda welcome: print("I am", welcome["client"]))
    client.subscribe(16, 10, Line, on_line)
    ticket = client.request(16, 1, STRING, "hello")
    while running:
        client.poll()                      # slots run here
        ...draw...
    client.close()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import queue
import threading
from typing import Any, Callable

from .bincode import Schema, decode
from .connection import Closed
from .session import RequestFailed, RequestRejected, SessionClient, SessionConfig


class Signal:
    """Slots connected to one event: ``connect(slot)`` returns a function
    that disconnects it; ``emit(*args)`` calls every slot in the order they
    were connected. A slot that raises does not stop the others: its error
    goes to ``on_slot_error`` (by default re-raised after the others ran)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._slots: list[Callable[..., Any]] = []

    def connect(self, slot: Callable[..., Any]) -> Callable[[], None]:
        self._slots.append(slot)
        return lambda: self._slots.remove(slot) if slot in self._slots else None

    def emit(self, *args: Any) -> None:
        failure = None
        for slot in list(self._slots):
            try:
                slot(*args)
            except Exception as err:  # noqa: BLE001 - one slot's bug must not silence the rest
                failure = failure or err
        if failure is not None:
            raise failure

    def __repr__(self) -> str:
        return f"Signal({self.name}, {len(self._slots)} slots)"


#: What :meth:`GameClient.status` says of a request still without verdict.
PENDING = "pending"
#: ... and of one the server accepted.
ACCEPTED = "accepted"


class GameClient:
    """A session client for game loops. Signals: ``welcomed(welcome)``,
    ``message(envelope)`` (every update), ``connection_lost(closed)`` (a
    reconnect follows), ``reconnecting(attempt)``, ``refused(refusal)``,
    ``disconnected(closed)`` (for good), ``error(exception)``,
    ``request_done(ticket, verdict)`` (``ACCEPTED``, a
    :class:`RequestRejected` with the reason, or a :class:`RequestFailed`)."""

    def __init__(self, addr: str, name: str | None = None, *, config: SessionConfig | None = None, **options: Any) -> None:
        self.welcomed = Signal("welcomed")
        self.message = Signal("message")
        self.connection_lost = Signal("connection_lost")
        self.reconnecting = Signal("reconnecting")
        self.refused = Signal("refused")
        self.disconnected = Signal("disconnected")
        self.error = Signal("error")
        self.request_done = Signal("request_done")
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        #: Called (on the network thread) whenever something arrives for
        #: :meth:`poll`: an event loop's wake-up (the Qt adapter's).
        self.notify: Callable[[], None] | None = None
        self._subscriptions: dict[tuple[int, int], list[Callable[[bytes], None]]] = {}
        self._verdicts: dict[int, Any] = {}
        self._tickets = itertools.count(1)
        self.closed: Closed | None = None
        self.client_id: str | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="switchboard", daemon=True)
        self._thread.start()
        self._session = self._call(lambda: SessionClient(addr, name, config=config, **options))
        asyncio.run_coroutine_threadsafe(self._follow(), self._loop)

    def _call(self, make: Callable[[], Any]) -> Any:
        async def run() -> Any:
            return make()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    async def _follow(self) -> None:
        session = self._session
        task = asyncio.get_running_loop().create_task(session.connect())
        async for event in session.events():
            self._post(event.kind, event.value)
        try:
            await task
        except (ConnectionError, OSError):
            pass

    def _post(self, kind: str, value: Any) -> None:
        self._inbox.put((kind, value))
        if self.notify is not None:
            self.notify()

    def poll(self) -> int:
        """Delivers what arrived since the last call as signals, here, in
        order; returns how many events it delivered."""
        delivered = 0
        while True:
            try:
                kind, value = self._inbox.get_nowait()
            except queue.Empty:
                return delivered
            delivered += 1
            self._deliver(kind, value)

    def _deliver(self, kind: str, value: Any) -> None:
        if kind == "message":
            for deliver in list(self._subscriptions.get((value.channel, value.action), ())):
                deliver(value.content)
            self.message.emit(value)
        elif kind == "welcome":
            self.client_id = value["client"]
            self.welcomed.emit(value)
        elif kind == "lost":
            self.connection_lost.emit(value)
        elif kind == "reconnecting":
            self.reconnecting.emit(value)
        elif kind == "refused":
            self.refused.emit(value)
        elif kind == "disconnected":
            self.closed = value
            self.disconnected.emit(value)
        elif kind == "verdict":
            ticket, verdict = value
            self._verdicts[ticket] = verdict
            self.request_done.emit(ticket, verdict)
        else:
            self.error.emit(value)

    def subscribe(self, channel: int, action: int, schema: Schema, slot: Callable[[Any], None]) -> Callable[[], None]:
        """Calls ``slot(value)`` from :meth:`poll` for every update on
        ``channel``/``action``, decoded with ``schema`` (an undecodable one
        goes to ``error``). Returns a function that unsubscribes."""

        def deliver(content: bytes) -> None:
            try:
                value = decode(schema, content)
            except ValueError as err:
                self.error.emit(err)
                return
            slot(value)

        slots = self._subscriptions.setdefault((channel, action), [])
        slots.append(deliver)
        return lambda: slots.remove(deliver) if deliver in slots else None

    def request(self, channel: int, action: int, schema: Schema, value: Any) -> int:
        """Sends a request; returns its ticket at once. Its verdict comes
        from :meth:`poll` as ``request_done`` and from :meth:`status`."""
        ticket = next(self._tickets)
        future = asyncio.run_coroutine_threadsafe(self._session.request(channel, action, schema, value), self._loop)

        def done(f: Any) -> None:
            failure = f.exception()
            verdict = ACCEPTED if failure is None else failure
            if not isinstance(verdict, (str, RequestRejected, RequestFailed)):
                verdict = RequestFailed("NotSent", str(verdict))
            self._post("verdict", (ticket, verdict))

        future.add_done_callback(done)
        return ticket

    def status(self, ticket: int) -> Any:
        """``PENDING`` until :meth:`poll` delivered the verdict, then the
        verdict: ``ACCEPTED``, a :class:`RequestRejected` or a
        :class:`RequestFailed`."""
        return self._verdicts.get(ticket, PENDING)

    def send(self, channel: int, action: int, schema: Schema, value: Any) -> None:
        """Sends a plain message (no verdict)."""
        self._loop.call_soon_threadsafe(self._session.send, channel, action, schema, value)

    def drop(self) -> None:
        """Breaks the connection without a goodbye (tests and demos)."""
        self._loop.call_soon_threadsafe(self._session.drop)

    def close(self, reason: str = "goodbye", timeout: float = 3.0) -> None:
        """Leaves for good and stops the background thread; what arrived
        until then is still delivered by :meth:`poll`."""
        if self._loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(self._session.close(reason), self._loop).result(timeout)
        except (concurrent.futures.TimeoutError, ConnectionError, OSError):
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        self._loop.close()
