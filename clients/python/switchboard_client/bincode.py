"""bincode 2 "standard" encoding (docs/PROTOCOL.md, section 3) for the types
games use, as small composable schemas: a schema has ``write(w, value)`` and
``read(r)``.

    Point = struct(x=F32, y=F32)
    data = encode(Point, {"x": 1.0, "y": 2.0})
    point = decode(Point, data)

Unsigned integers are varints (one byte below 251; else a marker 251, 252 or
253 and 2, 4 or 8 little-endian bytes), signed ones zig-zag varints.
"""

from __future__ import annotations

import struct as _struct
import uuid as _uuid
from typing import Any, Callable


class DecodeError(ValueError):
    """Bytes that are not one value of the schema they are read with."""


class Writer:
    """A growable buffer values are written into."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def u8(self, v: int) -> None:
        self.buf.append(v & 0xFF)

    def raw(self, data: bytes) -> None:
        self.buf += data

    def varint(self, v: int) -> None:
        if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v > 0xFFFF_FFFF_FFFF_FFFF:
            raise OverflowError(f"not an unsigned 64-bit integer: {v!r}")
        if v < 251:
            self.buf.append(v)
        elif v <= 0xFFFF:
            self.buf.append(251)
            self.buf += v.to_bytes(2, "little")
        elif v <= 0xFFFF_FFFF:
            self.buf.append(252)
            self.buf += v.to_bytes(4, "little")
        else:
            self.buf.append(253)
            self.buf += v.to_bytes(8, "little")

    def bytes(self) -> bytes:
        return bytes(self.buf)


class Reader:
    """Reads values from bytes, refusing anything out of bounds."""

    __slots__ = ("buf", "pos")

    def __init__(self, data: bytes) -> None:
        self.buf = memoryview(data)
        self.pos = 0

    def need(self, n: int) -> None:
        if self.pos + n > len(self.buf):
            raise DecodeError(f"unexpected end: {n} more bytes needed at {self.pos}")

    def u8(self) -> int:
        self.need(1)
        v = self.buf[self.pos]
        self.pos += 1
        return v

    def raw(self, n: int) -> bytes:
        self.need(n)
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def varint(self, bits: int = 64) -> int:
        marker = self.u8()
        if marker < 251:
            value = marker
        elif marker == 251:
            value = int.from_bytes(self.raw(2), "little")
        elif marker == 252 and bits >= 32:
            value = int.from_bytes(self.raw(4), "little")
        elif marker == 253 and bits >= 64:
            value = int.from_bytes(self.raw(8), "little")
        else:
            raise DecodeError(f"varint marker {marker} too wide for u{bits}")
        if value >= 1 << bits:
            raise DecodeError(f"u{bits} out of range: {value}")
        return value

    def left(self) -> int:
        return len(self.buf) - self.pos

    def done(self) -> bool:
        return self.pos == len(self.buf)


class Schema:
    """One type's encoding: ``write(w, value)`` and ``read(r)``."""

    def __init__(self, write: Callable[[Writer, Any], None], read: Callable[[Reader], Any], name: str) -> None:
        self.write = write
        self.read = read
        self.name = name

    def __repr__(self) -> str:
        return f"Schema({self.name})"


def encode(schema: Schema, value: Any) -> bytes:
    """``value`` encoded with ``schema``."""
    w = Writer()
    schema.write(w, value)
    return w.bytes()


def decode(schema: Schema, data: bytes) -> Any:
    """Exactly one value of ``schema`` from ``data``."""
    r = Reader(data)
    value = schema.read(r)
    if not r.done():
        raise DecodeError(f"{r.left()} bytes left after the value")
    return value


def _check_int(v: Any, low: int, high: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
        raise OverflowError(f"{v!r} not in {low}..={high}")
    return v


def _unsigned(bits: int) -> Schema:
    high = (1 << bits) - 1
    return Schema(lambda w, v: w.varint(_check_int(v, 0, high)), lambda r: r.varint(bits), f"u{bits}")


def _signed(bits: int) -> Schema:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def write(w: Writer, v: int) -> None:
        _check_int(v, low, high)
        w.varint(v * 2 if v >= 0 else -v * 2 - 1)

    def read(r: Reader) -> int:
        z = r.varint(bits)
        return -(z >> 1) - 1 if z & 1 else z >> 1

    return Schema(write, read, f"i{bits}")


U8 = Schema(lambda w, v: w.u8(_check_int(v, 0, 0xFF)), lambda r: r.u8(), "u8")
I8 = Schema(
    lambda w, v: w.u8(_check_int(v, -0x80, 0x7F) & 0xFF),
    lambda r: (r.u8() ^ 0x80) - 0x80,
    "i8",
)
U16, U32, U64 = _unsigned(16), _unsigned(32), _unsigned(64)
I16, I32, I64 = _signed(16), _signed(32), _signed(64)


def _read_bool(r: Reader) -> bool:
    b = r.u8()
    if b > 1:
        raise DecodeError(f"invalid bool {b}")
    return b == 1


BOOL = Schema(lambda w, v: w.u8(1 if v else 0), _read_bool, "bool")
F32 = Schema(lambda w, v: w.raw(_struct.pack("<f", v)), lambda r: _struct.unpack("<f", r.raw(4))[0], "f32")
F64 = Schema(lambda w, v: w.raw(_struct.pack("<d", v)), lambda r: _struct.unpack("<d", r.raw(8))[0], "f64")
UNIT = Schema(lambda w, v: None, lambda r: None, "()")


def _write_bytes(w: Writer, v: bytes) -> None:
    w.varint(len(v))
    w.raw(bytes(v))


def _read_len(r: Reader) -> int:
    n = r.varint()
    if n > r.left():
        raise DecodeError(f"a length of {n} runs past the end")
    return n


BYTES = Schema(_write_bytes, lambda r: r.raw(_read_len(r)), "bytes")


def _read_string(r: Reader) -> str:
    try:
        return r.raw(_read_len(r)).decode("utf-8")
    except UnicodeDecodeError as err:
        raise DecodeError("invalid UTF-8 in a string") from err


STRING = Schema(lambda w, v: _write_bytes(w, v.encode("utf-8")), _read_string, "string")


def fixed_bytes(n: int) -> Schema:
    """``[u8; n]``: exactly ``n`` bytes, no length."""

    def write(w: Writer, v: bytes) -> None:
        if len(v) != n:
            raise ValueError(f"expected {n} bytes, got {len(v)}")
        w.raw(bytes(v))

    return Schema(write, lambda r: r.raw(n), f"[u8; {n}]")


def _write_uuid(w: Writer, v: str) -> None:
    w.varint(16)
    w.raw(_uuid.UUID(v).bytes)


def _read_uuid(r: Reader) -> str:
    n = r.varint()
    if n != 16:
        raise DecodeError(f"a UUID has 16 bytes, not {n}")
    return str(_uuid.UUID(bytes=r.raw(16)))


UUID = Schema(_write_uuid, _read_uuid, "uuid")
"""A UUID (a ``ClientId``) as its text form; on the wire serde's byte form."""


def option(inner: Schema) -> Schema:
    """``Option<T>``: ``None`` for none."""

    def write(w: Writer, v: Any) -> None:
        if v is None:
            w.u8(0)
        else:
            w.u8(1)
            inner.write(w, v)

    def read(r: Reader) -> Any:
        tag = r.u8()
        if tag == 0:
            return None
        if tag != 1:
            raise DecodeError(f"invalid option tag {tag}")
        return inner.read(r)

    return Schema(write, read, f"option<{inner.name}>")


def vec(inner: Schema, limit: int = 1 << 20) -> Schema:
    """``Vec<T>``: a list; a reader accepts at most ``limit`` items (and no
    more than bytes remain: every item takes at least one)."""

    def write(w: Writer, v: list) -> None:
        w.varint(len(v))
        for item in v:
            inner.write(w, item)

    def read(r: Reader) -> list:
        n = r.varint()
        if n > limit or n > r.left() and inner is not UNIT:
            raise DecodeError(f"a sequence of {n} is too long")
        return [inner.read(r) for _ in range(n)]

    return Schema(write, read, f"vec<{inner.name}>")


def array(inner: Schema, n: int) -> Schema:
    """``[T; n]``: exactly ``n`` values, no length."""

    def write(w: Writer, v: list) -> None:
        if len(v) != n:
            raise ValueError(f"expected {n} items, got {len(v)}")
        for item in v:
            inner.write(w, item)

    return Schema(write, lambda r: [inner.read(r) for _ in range(n)], f"[{inner.name}; {n}]")


def tuple_of(*items: Schema) -> Schema:
    """``(A, B, ...)``: a list of the values."""

    def write(w: Writer, v: Any) -> None:
        for item, value in zip(items, v, strict=True):
            item.write(w, value)

    return Schema(write, lambda r: [item.read(r) for item in items], "tuple")


def map_of(key: Schema, value: Schema) -> Schema:
    """A map (``BTreeMap``, ``HashMap``) as a dict, written in key order as a
    ``BTreeMap`` is."""

    def write(w: Writer, v: dict) -> None:
        w.varint(len(v))
        for k in sorted(v):
            key.write(w, k)
            value.write(w, v[k])

    def read(r: Reader) -> dict:
        n = r.varint()
        if n > r.left():
            raise DecodeError(f"a map of {n} is too long")
        out = {}
        for _ in range(n):
            k = key.read(r)
            out[k] = value.read(r)
        return out

    return Schema(write, read, f"map<{key.name},{value.name}>")


def struct(**fields: Schema) -> Schema:
    """A struct as a dict: its fields in declaration order."""
    items = list(fields.items())

    def write(w: Writer, v: dict) -> None:
        for name, schema in items:
            schema.write(w, v[name])

    def read(r: Reader) -> dict:
        return {name: schema.read(r) for name, schema in items}

    return Schema(write, read, "struct")


def enum_of(*variants: str | tuple[str, Schema]) -> Schema:
    """An enum: ``variants`` by index, a name (a unit variant) or a
    ``(name, schema)`` pair. A unit variant's value is its name; another's is
    ``{name: value}``, as serde writes it in JSON."""
    listed = [(v, None) if isinstance(v, str) else v for v in variants]
    index = {name: i for i, (name, _) in enumerate(listed)}

    def write(w: Writer, v: Any) -> None:
        name = v if isinstance(v, str) else next(iter(v))
        if name not in index:
            raise ValueError(f"unknown variant {name!r}")
        w.varint(index[name])
        schema = listed[index[name]][1]
        if schema is not None:
            schema.write(w, v[name])

    def read(r: Reader) -> Any:
        i = r.varint(32)
        if i >= len(listed):
            raise DecodeError(f"unknown variant index {i}")
        name, schema = listed[i]
        return name if schema is None else {name: schema.read(r)}

    return Schema(write, read, "enum")
