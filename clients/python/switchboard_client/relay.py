"""The real-time relay (docs/PROTOCOL.md, section 10) over a connection:
transforms relayed to the other players in your zone.

    relay = await RelayClient.connect("127.0.0.1:7200", name="ada")
    relay.on("relayed", lambda r: draw(r["player_id"], r["transform"]))
    relay.move([1.0, 0.0, 2.0], zone="town")

``players`` holds the last transform of everyone in your zone. When the
zone lives on another relay of the service, the client follows the redirect
with its ticket and keeps its id there. With ``compact=True`` the relay
sends transforms as compact records (a few bytes each instead of about
fifty, positions to its precision, 1 cm by default): the events are the
same.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from .bincode import STRING, U32, Schema, decode
from .connection import Closed, Connection, ConnectionConfig
from .compact import CompactDecoder
from .schemas import RELAY_CHANNEL, Handover, Redirect, Relayed, RelayHello, RelayOptions, Transform


class RelayAction:
    HELLO = 1
    TRANSFORM = 2
    WELCOME = 3
    RELAYED = 4
    LEFT = 5
    ERROR = 6
    NOTICE = 7
    REDIRECT = 8
    HANDOVER = 9
    OPTIONS = 10
    BATCH = 11
    COMPACT = 12


EVENTS: dict[int, tuple[str, Schema]] = {
    RelayAction.WELCOME: ("welcome", U32),
    RelayAction.RELAYED: ("relayed", Relayed),
    RelayAction.LEFT: ("left", U32),
    RelayAction.ERROR: ("error", STRING),
    RelayAction.NOTICE: ("notice", STRING),
    RelayAction.REDIRECT: ("redirect", Redirect),
}


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class RelayClient:
    """A relay player. Events: ``welcome`` (your id), ``relayed`` (a
    Relayed: ``player_id``, ``server_time_ms``, ``transform``), ``left`` (a
    player id), ``error`` (the relay's message), ``notice`` (the
    operator's), ``redirect`` (handed over: the same id on the new relay),
    ``close`` (a Closed, once the connection ends)."""

    def __init__(self, config: ConnectionConfig | None = None) -> None:
        self.id: int | None = None
        self.players: dict[int, dict] = {}
        self.closed: Closed | None = None
        self._config = config or ConnectionConfig()
        self._slots: dict[str, list[Callable[[Any], None]]] = {}
        self._conn: Connection | None = None
        self._task: asyncio.Task | None = None
        self._welcomed = asyncio.Event()
        self._compact: CompactDecoder | None = None
        self._wants_compact = False

    @classmethod
    async def connect(
        cls,
        addr: str,
        name: str = "python player",
        bot: bool = False,
        config: ConnectionConfig | None = None,
        compact: bool = False,
    ) -> "RelayClient":
        """Joins the relay at ``addr`` (its native TCP port); returns once
        welcomed. ``compact``: ask for compact transforms."""
        client = cls(config)
        client._wants_compact = compact
        await client._attach(addr, RelayAction.HELLO, RelayHello, {"name": name, "bot": bot})
        await asyncio.wait_for(client._welcomed.wait(), client._config.handshake_timeout)
        return client

    async def _attach(self, addr: str, action: int, schema: Schema, greeting: dict) -> None:
        host, port = _split(addr)
        conn = await Connection.open(host, port, self._config)
        conn.send(RELAY_CHANNEL, action, schema, greeting)
        if self._wants_compact:
            conn.send(RELAY_CHANNEL, RelayAction.OPTIONS, RelayOptions, {"batch": False, "compact": True})
            # A new connection's stream starts from nothing.
            self._compact = CompactDecoder()
        self._conn = conn
        self._task = asyncio.get_running_loop().create_task(self._read(conn))

    async def _read(self, conn: Connection) -> None:
        while (message := await conn.recv()) is not None:
            if message.channel != RELAY_CHANNEL:
                continue
            if message.action == RelayAction.COMPACT and self._compact is not None:
                try:
                    frame = self._compact.read(message.content)
                except ValueError as err:
                    # The stream cannot be followed past it.
                    await conn.close(f"compact transforms: {err}")
                    break
                for record in frame["records"]:
                    if record["type"] == "transform":
                        relayed = {k: record[k] for k in ("player_id", "server_time_ms", "transform")}
                        self._show("relayed", relayed)
                    elif record["type"] == "left":
                        self._show("left", record["player_id"])
                    elif await self._take(record["action"], record["content"]):
                        return
            elif await self._take(message.action, message.content):
                return
        if conn is self._conn:
            self.closed = conn.closed
            self._emit("close", conn.closed)

    async def _take(self, action: int, content: bytes) -> bool:
        """One relay message, as it came alone or out of a compact frame;
        True once the client followed a redirect (this connection is done)."""
        if action not in EVENTS:
            return False
        name, schema = EVENTS[action]
        try:
            value = decode(schema, content)
        except ValueError:
            return False
        if name == "redirect":
            await self._follow(value)
            return True
        self._show(name, value)
        return False

    def _show(self, name: str, value: Any) -> None:
        if name == "welcome":
            self.id = value
            self._welcomed.set()
        elif name == "relayed":
            self.players[value["player_id"]] = value
        elif name == "left":
            self.players.pop(value, None)
        self._emit(name, value)

    async def _follow(self, redirect: dict) -> None:
        """The zone lives on another relay: go there with the ticket."""
        previous = self._conn
        self.players.clear()
        self._welcomed.clear()
        await self._attach(redirect["addr"], RelayAction.HANDOVER, Handover, redirect["ticket"])
        if previous is not None:
            await previous.close("handed over")
        self._emit("redirect", redirect)

    def on(self, event: str, slot: Callable[[Any], None]) -> Callable[[], None]:
        """Calls ``slot(value)`` for every ``event``; returns a function
        that disconnects it."""
        slots = self._slots.setdefault(event, [])
        slots.append(slot)
        return lambda: slots.remove(slot) if slot in slots else None

    def _emit(self, event: str, value: Any) -> None:
        for slot in list(self._slots.get(event, ())):
            slot(value)

    def move(
        self,
        position: list[float],
        rotation: list[float] | None = None,
        zone: str = "default",
        state: dict | None = None,
        extra: dict | None = None,
    ) -> None:
        """Sends a transform."""
        if self._conn is None:
            raise ConnectionError("not connected")
        transform = {
            "position": list(position),
            "rotation": list(rotation or [0.0, 0.0, 0.0]),
            "zone": zone,
            "state": state,
            "extra": extra or {},
        }
        self._conn.send(RELAY_CHANNEL, RelayAction.TRANSFORM, Transform, transform)

    async def close(self, reason: str = "bye") -> None:
        if self._conn is not None:
            await self._conn.close(reason)
        if self._task is not None:
            await asyncio.wait([self._task], timeout=3)
