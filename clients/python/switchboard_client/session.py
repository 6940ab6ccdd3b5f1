"""Sessions with a ``ServerManager`` (docs/PROTOCOL.md, section 6), on
asyncio: hello and welcome, an id that survives reconnects (kept with a
token that rotates at every welcome), requests answered with accepted,
rejected (with the reason for the player) or an error, and updates by
channel and action.

    client = SessionClient("127.0.0.1:7000", name="ada")
    welcome = await client.connect()
    client.subscribe(16, 10, Line, print)
    await client.request(16, 1, STRING, "hello")     # raises RequestRejected
    async for event in client.events(): ...          # every event, in order

Reconnects after a lost connection: 0.2 s doubling up to 5 s, each wait
drawn between half and all of it; the first attempt goes back to the server
that welcomed the client, each further one to the next fallback server.
"""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from .bincode import U64, Schema, decode, encode
from .connection import CloseCode, Closed, Connection, ConnectionConfig, split_join
from .frame import Envelope
from .schemas import (
    SESSION_CHANNEL,
    ErrorReply,
    Hello,
    Refused,
    Rejected,
    RequestFrame,
    SessionAction,
    Welcome,
)

#: Closes after which coming back with the same credentials is pointless.
FINAL_CLOSES = {CloseCode.NORMAL, CloseCode.REFUSED, CloseCode.REPLACED, CloseCode.KICKED, CloseCode.ABUSE}

_RETRY_AFTER = re.compile(r"\(retry after (\d+) ms\)$")


def retry_after(reason: str) -> float | None:
    """The retry-after a close reason ends with (``"... (retry after 500
    ms)"``, docs/PROTOCOL.md section 2), in seconds, or None."""
    match = _RETRY_AFTER.search(reason or "")
    return int(match.group(1)) / 1000 if match else None


class RequestRejected(Exception):
    """The server rejected a request; ``reason`` is for the player."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RequestFailed(Exception):
    """The server could not handle a request (``code``: an ErrorCode name),
    or the connection was lost before its verdict."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class JoinRefused(ConnectionError):
    """The server did not let the client in (``code``, ``reason``)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"refused: {reason} (refusal {code})")
        self.code = code
        self.reason = reason


@dataclass(frozen=True)
class Event:
    """One thing the client heard, in order: ``kind`` is ``welcome``
    (``value``: the welcome), ``message`` (an Envelope), ``refused``,
    ``lost`` (a Closed; a reconnect follows), ``reconnecting`` (the attempt's
    number), ``disconnected`` (a Closed: for good), or ``error``."""

    kind: str
    value: Any = None


@dataclass
class SessionConfig:
    """How a client joins and comes back."""

    name: str
    password: str | None = None
    credentials: bytes = b""
    reconnect: bool = True
    max_attempts: int = 30
    initial_delay: float = 0.2
    max_delay: float = 5.0
    request_timeout: float = 30.0
    fallback_servers: list[str] = field(default_factory=list)
    connection: ConnectionConfig = field(default_factory=ConnectionConfig)


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class SessionClient:
    """A client of a ``ServerManager`` on asyncio (one event loop)."""

    def __init__(self, addr: str, name: str | None = None, *, config: SessionConfig | None = None, **options: Any) -> None:
        if config is None:
            config = SessionConfig(name=name or "player", **options)
        self.config = config
        self.servers = [addr, *config.fallback_servers]
        self.home = 0
        self.target = 0
        self.client: str | None = None
        self.resume: dict | None = None
        self.welcome: dict | None = None
        self.connection: Connection | None = None
        self.closed: Closed | None = None
        #: How many times a server turned this client away for now (close
        #: 1013 with a retry-after) and it waited and tried again.
        self.told_to_wait = 0
        self._next_id = 1
        self._pending: dict[int, asyncio.Future] = {}
        # Each pending request's frame and the connection it last went on
        # (0: none yet): what goes again when the session resumes.
        self._frames: dict[int, tuple[dict, int]] = {}
        self._connections = 0
        self._is_welcomed = False
        self._subscriptions: dict[tuple[int, int], list[Callable[[bytes], None]]] = {}
        self._listeners: list[Callable[[Envelope], None]] = []
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._welcomed = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closing = False
        self._refused: dict | None = None

    async def connect(self) -> dict:
        """Joins; returns the welcome (``client``, ``token``, ``resumed``,
        ``grace_secs``). Raises :class:`JoinRefused` or ``ConnectionError``."""
        self._task = asyncio.get_running_loop().create_task(self._run())
        waiter = asyncio.ensure_future(self._welcomed.wait())
        await asyncio.wait([waiter, self._task], return_when=asyncio.FIRST_COMPLETED)
        if self.welcome is not None and self._welcomed.is_set():
            return self.welcome
        waiter.cancel()
        if self._refused is not None:
            raise JoinRefused(self._refused["code"], self._refused["reason"])
        raise ConnectionError(self.closed.reason if self.closed else "could not join")

    def events(self) -> AsyncIterator[Event]:
        """Every event in order, until the client is disconnected for good."""
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        while True:
            event = await self._events.get()
            yield event
            if event.kind == "disconnected":
                return

    async def request(self, channel: int, action: int, schema: Schema, value: Any) -> None:
        """Sends a request; returns once the server accepted it (its updates
        have arrived by then). Raises :class:`RequestRejected` with the
        reason, or :class:`RequestFailed`."""
        open_now = self.connection is not None and self.connection.closed is None
        reconnecting = self._task is not None and not self._task.done() and self.resume is not None
        if not open_now and not reconnecting:
            raise RequestFailed("NotConnected", "not connected")
        request_id = self._next_id
        self._next_id += 1
        frame = {"id": request_id, "channel": channel, "action": action, "content": encode(schema, value)}
        verdict = asyncio.get_running_loop().create_future()
        self._pending[request_id] = verdict
        # On a reconnect nothing new goes before the session is back and the
        # older requests went again: the server sees them in the order made.
        sent_on = 0
        if open_now and (self._is_welcomed or self.resume is None):
            self.connection.send(SESSION_CHANNEL, SessionAction.REQUEST, RequestFrame, frame)
            sent_on = self._connections
        self._frames[request_id] = (frame, sent_on)
        try:
            await asyncio.wait_for(asyncio.shield(verdict), self.config.request_timeout)
        except asyncio.TimeoutError as err:
            raise RequestFailed("Timeout", f"no verdict in {self.config.request_timeout} s") from err
        finally:
            self._pending.pop(request_id, None)
            self._frames.pop(request_id, None)

    def _send_again(self, resumed: bool) -> None:
        """The session is back (``resumed``) or a new one began: requests not
        yet sent on this connection go again, marked so that the server
        applies none twice; in a new session they fail as lost."""
        for request_id in sorted(self._frames):
            frame, sent_on = self._frames[request_id]
            if sent_on == self._connections:
                continue
            if resumed:
                self.connection.send(SESSION_CHANNEL, SessionAction.REQUEST_AGAIN, RequestFrame, frame)
                self._frames[request_id] = (frame, self._connections)
            else:
                self._settle(request_id, RequestFailed("ConnectionLost", "a new session began"))

    def send(self, channel: int, action: int, schema: Schema, value: Any) -> None:
        """Sends a plain message (no verdict)."""
        if self.connection is None:
            raise ConnectionError("not connected")
        self.connection.send(channel, action, schema, value)

    def listen(self, slot: Callable[[Envelope], None]) -> Callable[[], None]:
        """Calls ``slot(envelope)`` for every update, in order (what a layer
        on top, the rooms client say, reads). Returns a function that stops."""
        self._listeners.append(slot)
        return lambda: self._listeners.remove(slot) if slot in self._listeners else None

    def subscribe(self, channel: int, action: int, schema: Schema, slot: Callable[[Any], None]) -> Callable[[], None]:
        """Calls ``slot(value)`` for every update on ``channel``/``action``,
        decoded with ``schema`` (an undecodable one is an ``error`` event).
        Returns a function that unsubscribes."""

        def deliver(content: bytes) -> None:
            try:
                value = decode(schema, content)
            except ValueError as err:
                self._events.put_nowait(Event("error", err))
                return
            slot(value)

        slots = self._subscriptions.setdefault((channel, action), [])
        slots.append(deliver)
        return lambda: slots.remove(deliver) if deliver in slots else None

    async def close(self, reason: str = "goodbye") -> None:
        """Leaves: the session ends at once on the server; no reconnect."""
        self._closing = True
        if self.connection is not None:
            await self.connection.close(reason)
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 3)
            except asyncio.TimeoutError:
                self._task.cancel()

    def drop(self) -> None:
        """Breaks the connection without a goodbye, as a network failure
        would: the client reconnects (for tests and demos)."""
        if self.connection is not None:
            self.connection.drop()

    async def _run(self) -> None:
        attempt = 0
        while True:
            self.target = self.home if attempt <= 1 else (self.home + attempt - 1) % len(self.servers)
            closed = await self._session(attempt)
            self._is_welcomed = False
            attempt += 1
            # A server too busy to take this connection now says when to
            # come back (close 1013, "... (retry after N ms)"): a first join
            # waits and tries again too.
            told = retry_after(closed.reason) if closed.code == CloseCode.SERVER_FULL else None
            final = (
                self._closing
                or self._refused is not None
                or not self.config.reconnect
                or (self.resume is None and told is None)
                or (not closed.lost and closed.code in FINAL_CLOSES)
                or attempt > self.config.max_attempts
            )
            if final:
                # No session to come back to: what waited for a verdict is lost.
                for verdict in self._pending.values():
                    if not verdict.done():
                        verdict.set_exception(RequestFailed("ConnectionLost", closed.reason))
                self.closed = closed
                self._events.put_nowait(Event("disconnected", closed))
                return
            if attempt == 1:
                self._events.put_nowait(Event("lost", closed))
            if told is not None:
                self.told_to_wait += 1
            ceiling = min(self.config.max_delay, self.config.initial_delay * 2 ** (attempt - 1))
            await asyncio.sleep(max(ceiling / 2 + random.random() * ceiling / 2, told or 0.0))
            if self._closing:
                continue
            self._events.put_nowait(Event("reconnecting", attempt))

    async def _session(self, attempt: int) -> Closed:
        code, addr = split_join(self.servers[self.target])
        host, port = _split(addr)
        try:
            conn = await Connection.open(host, port, self.config.connection, join_code=code)
        except ConnectionError as err:
            return Closed(None, str(err), by_peer=False, lost=True)
        self.connection = conn
        self._connections += 1
        hello = {
            "name": self.config.name,
            "password": self.config.password,
            "credentials": self.config.credentials,
            "resume": self.resume,
        }
        conn.send(SESSION_CHANNEL, SessionAction.HELLO, Hello, hello)
        while (message := await conn.recv()) is not None:
            self._dispatch(message)
        return conn.closed or Closed(None, "connection lost", by_peer=False, lost=True)

    def _dispatch(self, message: Envelope) -> None:
        if message.channel != SESSION_CHANNEL:
            self._events.put_nowait(Event("message", message))
            for listener in list(self._listeners):
                listener(message)
            for deliver in list(self._subscriptions.get((message.channel, message.action), ())):
                deliver(message.content)
            return
        try:
            self._session_message(message)
        except ValueError as err:
            self._events.put_nowait(Event("error", err))

    def _session_message(self, message: Envelope) -> None:
        action, content = message.action, message.content
        if action == SessionAction.WELCOME:
            welcome = decode(Welcome, content)
            self.welcome = welcome
            self.client = welcome["client"]
            # The token rotates with every welcome: only the latest is good.
            self.resume = {"client": welcome["client"], "token": welcome["token"]}
            self.home = self.target
            self._is_welcomed = True
            self._send_again(welcome["resumed"])
            self._welcomed.set()
            self._events.put_nowait(Event("welcome", welcome))
        elif action == SessionAction.REFUSED:
            self._refused = decode(Refused, content)
            self._events.put_nowait(Event("refused", self._refused))
        elif action == SessionAction.ACCEPTED:
            self._settle(decode(U64, content), None)
        elif action == SessionAction.REJECTED:
            rejected = decode(Rejected, content)
            if not self._settle(rejected["id"], RequestRejected(rejected["reason"])):
                self._events.put_nowait(Event("error", RequestRejected(rejected["reason"])))
        elif action == SessionAction.ERROR:
            reply = decode(ErrorReply, content)
            failure = RequestFailed(reply["code"], reply["detail"])
            if not self._settle(reply["id"], failure):
                self._events.put_nowait(Event("error", failure))
        else:
            self._events.put_nowait(Event("error", ValueError(f"unknown session action {action}")))

    def _settle(self, request_id: int, failure: Exception | None) -> bool:
        verdict = self._pending.get(request_id)
        if verdict is None or verdict.done():
            return False
        if failure is None:
            verdict.set_result(None)
        else:
            verdict.set_exception(failure)
        return True
