"""Compact transforms (docs/PROTOCOL.md, section 10, "Compact transforms"):
the relay's ``Compact`` frames read back into whole transforms. One decoder
per connection: each frame is written against what this connection got
before (the last transform of each sender), so frames are read in order,
and a new connection starts a new decoder.

    decoder = CompactDecoder()
    frame = decoder.read(content)
    for record in frame["records"]:
        if record["type"] == "transform":
            draw(record["player_id"], record["transform"])
"""

from __future__ import annotations

import struct

from .bincode import DecodeError, Reader

MAX_SLOTS = 1 << 16
MAX_ZONES = 1 << 16
MAX_UNITS = (1 << 31) - 1
MAX_EXTRA = 32
MAX_EXTRA_LEN = 1024
MAX_ZONE = 64

FULL, ROTATION, STATE, ZONE, EXTRA, STILL = 0x04, 0x08, 0x10, 0x20, 0x40, 0x80
WHOLE = FULL | ROTATION | STATE | ZONE | EXTRA
NO_STATE = 0x80
ANGLE_BITS = (10, 12, 10)


def _f32(value: float) -> float:
    """``value`` rounded to the nearest f32, as the relay's numbers are."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _signed(r: Reader) -> int:
    z = r.varint(64)
    return -(z >> 1) - 1 if z & 1 else z >> 1


def _string(r: Reader, limit: int) -> str:
    n = r.varint(64)
    if n > limit:
        raise DecodeError(f"a string over its limit ({n} > {limit})")
    try:
        return r.raw(n).decode("utf-8")
    except UnicodeDecodeError as err:
        raise DecodeError("a string that is not UTF-8") from err


def _slot(r: Reader) -> int:
    slot = r.varint(32)
    if slot >= MAX_SLOTS:
        raise DecodeError("a slot number out of range")
    return slot


def _rotation(packed: int) -> list[float]:
    out, shift = [], 0
    for bits in ANGLE_BITS:
        steps = 1 << bits
        out.append(_f32(((packed >> shift) & (steps - 1)) * 360 / steps))
        shift += bits
    return out


def _movement(bits: int, speed: int) -> dict | None:
    if bits & NO_STATE:
        return None
    return {
        "moving": bool(bits & 1),
        "sprinting": bool(bits & 2),
        "sneaking": bool(bits & 4),
        "jumping": bool(bits & 8),
        "weapon_drawn": bool(bits & 16),
        "speed": _f32(speed / 100),
    }


class CompactDecoder:
    """One connection's compact stream, read frame by frame."""

    def __init__(self) -> None:
        #: Game units per unit of a quantized position, once the relay said.
        self.precision: float | None = None
        self._slots: dict[int, dict] = {}
        self._zones: dict[int, str] = {}

    def read(self, content: bytes) -> dict:
        """Reads one ``Compact`` frame's content: ``{"tick", "server_time_ms",
        "records"}``, each record ``{"type": "transform", "player_id",
        "server_time_ms", "transform", "extra_changed"}``, ``{"type":
        "left", "player_id"}`` or ``{"type": "message", "action",
        "content"}``. Raises DecodeError on bytes it cannot follow: the
        connection should then be closed."""
        r = Reader(content)
        tick = r.varint(64)
        server_time_ms = r.varint(64)
        stamp = server_time_ms
        records: list[dict] = []
        while not r.done():
            head = r.u8()
            kind = head & 3
            if kind == 0:
                record = self._transform(r, head, stamp)
                stamp = record["server_time_ms"]
                records.append(record)
            elif kind == 1:
                slot = _slot(r)
                self._slots[slot] = {"player_id": r.varint(32), "units": [0, 0, 0], "transform": None}
            elif kind == 2:
                gone = self._slots.pop(_slot(r), None)
                if gone is None:
                    raise DecodeError("a leaving from an empty slot")
                records.append({"type": "left", "player_id": gone["player_id"]})
            elif head >> 2 == 0:
                (precision,) = struct.unpack("<f", r.raw(4))
                if not precision > 0 or precision == float("inf"):
                    raise DecodeError("a precision that is not a positive number")
                self.precision = precision
            elif head >> 2 == 1:
                zone = r.varint(32)
                if zone >= MAX_ZONES:
                    raise DecodeError("a zone number out of range")
                self._zones[zone] = _string(r, MAX_ZONE)
            elif head >> 2 == 2:
                action = r.varint(16)
                records.append({"type": "message", "action": action, "content": r.raw(r.varint(64))})
            else:
                raise DecodeError(f"unknown record kind 3.{head >> 2}")
        return {"tick": tick, "server_time_ms": server_time_ms, "records": records}

    def _transform(self, r: Reader, head: int, previous: int) -> dict:
        if self.precision is None:
            raise DecodeError("a transform before the setup record")
        if head & FULL and head & STILL:
            raise DecodeError("a transform both whole and still")
        slot = _slot(r)
        server_time_ms = previous + _signed(r)
        held = self._slots.get(slot)
        if held is None:
            raise DecodeError("a transform for an empty slot")
        if held["transform"] is None and head & WHOLE != WHOLE:
            raise DecodeError("a sender's first transform is not whole")
        last = held["transform"] or {"position": [0.0] * 3, "rotation": [0.0] * 3, "zone": "", "state": None, "extra": {}}
        t = dict(last, position=list(last["position"]))
        if not head & STILL:
            for axis in range(3):
                value = _signed(r)
                units = value if head & FULL else held["units"][axis] + value
                if abs(units) > MAX_UNITS:
                    raise DecodeError("a position out of range")
                value = units * self.precision
                if abs(value) > 3.4028234663852886e38:
                    raise DecodeError("a position out of range")
                held["units"][axis] = units
                t["position"][axis] = _f32(value)
        if head & ROTATION:
            t["rotation"] = _rotation(int.from_bytes(r.raw(4), "little"))
        if head & STATE:
            bits = r.u8()
            t["state"] = _movement(bits, 0 if bits & NO_STATE else _signed(r))
        if head & ZONE:
            zone = self._zones.get(r.varint(32))
            if zone is None:
                raise DecodeError("an undefined zone")
            t["zone"] = zone
        extra_changed = bool(head & EXTRA)
        if extra_changed:
            count = r.varint(64)
            if count > MAX_EXTRA:
                raise DecodeError("too many unknown fields")
            extra = {}
            for _ in range(count):
                key = _string(r, MAX_EXTRA_LEN)
                extra[key] = _string(r, MAX_EXTRA_LEN)
            t["extra"] = extra
        held["transform"] = t
        return {
            "type": "transform",
            "player_id": held["player_id"],
            "server_time_ms": server_time_ms,
            "transform": t,
            "extra_changed": extra_changed,
        }
