"""The framework's own messages as schemas, field names as in the Rust types
(snake_case): sessions (docs/PROTOCOL.md, section 6), rooms (section 9) and
the relay (section 10)."""

from __future__ import annotations

from .bincode import (
    BOOL,
    BYTES,
    F32,
    STRING,
    U8,
    U16,
    U32,
    U64,
    UUID,
    array,
    enum_of,
    fixed_bytes,
    map_of,
    option,
    struct,
    vec,
)

# Sessions: channel 1.
SESSION_CHANNEL = 1


class SessionAction:
    HELLO = 1
    WELCOME = 2
    REFUSED = 3
    REQUEST = 4
    ACCEPTED = 5
    REJECTED = 6
    ERROR = 7
    REQUEST_AGAIN = 8


Resume = struct(client=UUID, token=fixed_bytes(32))
Hello = struct(name=STRING, password=option(STRING), credentials=BYTES, resume=option(Resume))
Welcome = struct(client=UUID, token=fixed_bytes(32), resumed=BOOL, grace_secs=U32)
Refused = struct(code=U16, reason=STRING)
RequestFrame = struct(id=U64, channel=U16, action=U16, content=BYTES)
Rejected = struct(id=U64, reason=STRING)
ErrorCode = enum_of(
    "UnknownChannel",
    "UnknownAction",
    "BadContent",
    "NotWelcomed",
    "RateLimited",
    "UnknownSessionAction",
    "AlreadyHandled",
)
ErrorReply = struct(id=U64, code=ErrorCode, detail=STRING)

# Rooms: channel 2.
ROOMS_CHANNEL = 2

_metadata = map_of(STRING, STRING)
RoomId = U32
EntityId = U32
CreateRoom = struct(name=STRING, max_players=U8, metadata=_metadata, private=BOOL)
Kick = struct(player=UUID, reason=STRING)
RpcTarget = enum_of("All", "Others", ("One", UUID), "Host")
RpcRequest = struct(method=STRING, target=RpcTarget, args=BYTES)
RpcCall = struct(**{"from": UUID, "method": STRING, "args": BYTES})
CustomRequest = struct(channel=STRING, data=BYTES)
CustomMessage = struct(**{"from": UUID, "channel": STRING, "data": BYTES})
SpawnRequest = struct(kind=STRING, state=BYTES)
EntityUpdate = struct(id=EntityId, state=BYTES)
#: A sync of changed entities, stamped with the server's time (ms).
StateSync = struct(server_time_ms=U64, updates=vec(EntityUpdate))
Transfer = struct(id=EntityId, owner=UUID)
RoomPlayer = struct(id=UUID, name=STRING, host=BOOL, ready=BOOL, connected=BOOL, latency_ms=U32)
PlayerLeft = struct(id=UUID, reason=STRING)
Entity = struct(id=EntityId, owner=UUID, kind=STRING, state=BYTES)
RoomState = struct(
    id=RoomId,
    name=STRING,
    max_players=U8,
    metadata=_metadata,
    locked=BOOL,
    started=BOOL,
    players=vec(RoomPlayer),
    entities=vec(Entity),
    more_entities=U32,
)
RoomSummary = struct(
    id=RoomId,
    name=STRING,
    players=U8,
    max_players=U8,
    metadata=_metadata,
    locked=BOOL,
    started=BOOL,
)

# The relay: channel 3.
RELAY_CHANNEL = 3

RelayHello = struct(name=STRING, bot=BOOL)
# What a client asks of the relay, after the hello.
RelayOptions = struct(batch=BOOL, compact=BOOL)
MovementState = struct(
    moving=BOOL, sprinting=BOOL, sneaking=BOOL, jumping=BOOL, weapon_drawn=BOOL, speed=F32
)
Transform = struct(
    position=array(F32, 3),
    rotation=array(F32, 3),
    zone=STRING,
    state=option(MovementState),
    extra=map_of(STRING, STRING),
)
Relayed = struct(player_id=U32, server_time_ms=U64, transform=Transform)
Handover = struct(
    player_id=U32,
    name=STRING,
    bot=BOOL,
    process=U32,
    expires_ms=U64,
    nonce=fixed_bytes(16),
    mac=fixed_bytes(32),
)
Redirect = struct(addr=STRING, websocket=option(STRING), ticket=Handover)
