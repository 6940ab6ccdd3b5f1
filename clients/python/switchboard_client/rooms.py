"""Rooms, lobby, RPC and replication (docs/PROTOCOL.md, section 9) over a
connected :class:`~switchboard_client.session.SessionClient`: what the Rust
``RoomClient`` is.

    rooms = RoomClient(session)
    room = await rooms.create("duel", max_players=2)
    rooms.on("player_joined", lambda player: print(player["name"]))
    await rooms.ready(True)

Requests raise ``RequestRejected`` with the server's reason; events are
delivered to ``on(name, slot)`` slots by name, and :attr:`RoomClient.room`
holds the room as the events describe it (players and entities by id).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from .bincode import BOOL, UNIT, UUID, STRING, Schema, decode, vec
from .frame import Envelope
from .schemas import (
    ROOMS_CHANNEL,
    CreateRoom,
    CustomMessage,
    CustomRequest,
    Entity,
    EntityId,
    EntityUpdate,
    Kick,
    PlayerLeft,
    RoomId,
    RoomPlayer,
    RoomState,
    RoomSummary,
    RpcCall,
    RpcRequest,
    SpawnRequest,
    StateSync,
    Transfer,
)
from .session import SessionClient


class RoomAction:
    CREATE = 1
    LIST_ROOMS = 2
    JOIN = 3
    LEAVE = 4
    READY = 5
    START = 6
    KICK = 7
    LOCK = 8
    RPC = 9
    CUSTOM = 10
    SPAWN = 11
    DESPAWN = 12
    UPDATE = 13
    TRANSFER = 14


#: Server events by action: the name each is delivered as, and its schema.
EVENTS: dict[int, tuple[str, Schema]] = {
    20: ("state", RoomState),
    21: ("player_joined", RoomPlayer),
    22: ("player_left", PlayerLeft),
    23: ("host_changed", UUID),
    24: ("started", UNIT),
    25: ("player_changed", RoomPlayer),
    26: ("rpc", RpcCall),
    27: ("custom", CustomMessage),
    28: ("kicked", STRING),
    29: ("list", vec(RoomSummary)),
    30: ("spawned", Entity),
    31: ("despawned", EntityId),
    32: ("state_update", StateSync),
    33: ("owner_changed", Transfer),
}


class RoomClient:
    """Rooms over a connected session. Events (each with its decoded
    value): ``state``, ``player_joined``, ``player_left``, ``host_changed``,
    ``started``, ``player_changed``, ``rpc``, ``custom``, ``kicked``,
    ``list``, ``spawned``, ``despawned``, ``state_update``,
    ``owner_changed``, and ``error`` (an undecodable event)."""

    def __init__(self, session: SessionClient) -> None:
        self.session = session
        #: The room this client is in, as the events describe it (players and
        #: entities as dicts by id); None when in none.
        self.room: dict | None = None
        self._slots: dict[str, list[Callable[[Any], None]]] = {}
        session.listen(self._message)

    def on(self, event: str, slot: Callable[[Any], None]) -> Callable[[], None]:
        """Calls ``slot(value)`` for every ``event``; returns a function
        that disconnects it."""
        slots = self._slots.setdefault(event, [])
        slots.append(slot)
        return lambda: slots.remove(slot) if slot in slots else None

    async def next(self, event: str, where: Callable[[Any], bool] = lambda _: True) -> Any:
        """The next ``event`` (whose value ``where`` accepts)."""
        got: asyncio.Future = asyncio.get_running_loop().create_future()

        def slot(value: Any) -> None:
            if not got.done() and where(value):
                got.set_result(value)

        off = self.on(event, slot)
        try:
            return await got
        finally:
            off()

    def _emit(self, event: str, value: Any) -> None:
        for slot in list(self._slots.get(event, ())):
            slot(value)

    def _message(self, message: Envelope) -> None:
        if message.channel != ROOMS_CHANNEL:
            return
        known = EVENTS.get(message.action)
        if known is None:
            self._emit("error", ValueError(f"unknown rooms event {message.action}"))
            return
        name, schema = known
        try:
            value = decode(schema, message.content)
        except ValueError as err:
            self._emit("error", err)
            return
        self._apply(name, value)
        self._emit(name, value)

    def _apply(self, name: str, value: Any) -> None:
        """Keeps :attr:`room` in step with an event."""
        if name == "state":
            self.room = {
                **value,
                "players": {p["id"]: p for p in value["players"]},
                "entities": {e["id"]: e for e in value["entities"]},
            }
            return
        if name == "kicked":
            self.room = None
            return
        room = self.room
        if room is None:
            return
        if name in ("player_joined", "player_changed"):
            room["players"][value["id"]] = value
        elif name == "player_left":
            room["players"].pop(value["id"], None)
        elif name == "host_changed":
            for player in room["players"].values():
                player["host"] = player["id"] == value
        elif name == "started":
            room["started"] = True
        elif name == "spawned":
            room["entities"][value["id"]] = value
        elif name == "despawned":
            room["entities"].pop(value, None)
        elif name == "state_update":
            for update in value["updates"]:
                if update["id"] in room["entities"]:
                    room["entities"][update["id"]]["state"] = update["state"]
        elif name == "owner_changed" and value["id"] in room["entities"]:
            room["entities"][value["id"]]["owner"] = value["owner"]

    async def request(self, action: int, schema: Schema, value: Any) -> None:
        await self.session.request(ROOMS_CHANNEL, action, schema, value)

    async def _expect(self, event: str, action: int, schema: Schema, value: Any) -> Any:
        """Sends a request and returns the next ``event`` it brings."""
        waiter = asyncio.ensure_future(self.next(event))
        await asyncio.sleep(0)  # the slot is connected before the request goes
        try:
            await self.request(action, schema, value)
        except BaseException:
            waiter.cancel()
            raise
        return await waiter

    async def create(self, name: str, max_players: int = 8, metadata: dict | None = None, private: bool = False) -> dict:
        """Creates a room and joins it as host; returns its state."""
        room = {"name": name, "max_players": max_players, "metadata": metadata or {}, "private": private}
        return await self._expect("state", RoomAction.CREATE, CreateRoom, room)

    async def list(self) -> list[dict]:
        """The public rooms."""
        return await self._expect("list", RoomAction.LIST_ROOMS, UNIT, None)

    async def join(self, room_id: int) -> dict:
        """Joins a room by id; returns its state."""
        return await self._expect("state", RoomAction.JOIN, RoomId, room_id)

    async def leave(self) -> None:
        await self.request(RoomAction.LEAVE, UNIT, None)
        self.room = None

    async def ready(self, ready: bool = True) -> None:
        await self.request(RoomAction.READY, BOOL, ready)

    async def start(self) -> None:
        await self.request(RoomAction.START, UNIT, None)

    async def kick(self, player: str, reason: str) -> None:
        await self.request(RoomAction.KICK, Kick, {"player": player, "reason": reason})

    async def lock(self, locked: bool = True) -> None:
        await self.request(RoomAction.LOCK, BOOL, locked)

    async def rpc(self, method: str, target: Any, args: bytes = b"") -> None:
        """Calls ``method`` on ``target`` ("All", "Others", "Host" or
        ``{"One": client_id}``) with encoded ``args``."""
        await self.request(RoomAction.RPC, RpcRequest, {"method": method, "target": target, "args": args})

    async def custom(self, channel: str, data: bytes) -> None:
        await self.request(RoomAction.CUSTOM, CustomRequest, {"channel": channel, "data": data})

    async def spawn(self, kind: str, state: bytes) -> dict:
        """Spawns an entity this client owns; returns it."""
        me = self.session.client
        waiter = asyncio.ensure_future(
            self.next("spawned", lambda e: e["owner"] == me and e["kind"] == kind)
        )
        await asyncio.sleep(0)
        try:
            await self.request(RoomAction.SPAWN, SpawnRequest, {"kind": kind, "state": state})
        except BaseException:
            waiter.cancel()
            raise
        return await waiter

    async def despawn(self, entity: int) -> None:
        await self.request(RoomAction.DESPAWN, EntityId, entity)

    async def update(self, entity: int, state: bytes) -> None:
        await self.request(RoomAction.UPDATE, EntityUpdate, {"id": entity, "state": state})

    async def transfer(self, entity: int, owner: str) -> None:
        await self.request(RoomAction.TRANSFER, Transfer, {"id": entity, "owner": owner})
