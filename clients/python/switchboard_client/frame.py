"""Frames and the message envelope (docs/PROTOCOL.md, sections 1 and 3).

    | length u32 BE (flags + body) | flags u8 | body |

Bit 0 of the flags says the body is a zlib stream; it is inflated never past
a limit (checked while inflating: the stream's own claims are not trusted).
Over TCP frames follow each other in one stream (:class:`FrameDecoder` cuts
them, checking the length before buffering a body); over WebSocket each
binary message is one frame.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from .bincode import Reader, Schema, Writer

HEADER_LEN = 5
FLAG_COMPRESSED = 0x01
COMPRESS_THRESHOLD = 512


@dataclass(frozen=True)
class Limits:
    """What a receiver accepts, as the Rust ``CodecConfig`` defaults."""

    max_frame_len: int = 1024 * 1024
    max_decompressed_len: int = 4 * 1024 * 1024


DEFAULT_LIMITS = Limits()


class FrameError(ValueError):
    """A frame that breaks the format or a limit."""


def encode_frame(payload: bytes, compress_threshold: int | None = None) -> bytes:
    """A frame around ``payload``: raw, or zlib-compressed when
    ``compress_threshold`` is given, the payload is at least that long, and
    compression shrinks it (the Rust sender's rule)."""
    if compress_threshold is not None and len(payload) >= compress_threshold:
        body = zlib.compress(payload)
        if len(body) < len(payload):
            return (len(body) + 1).to_bytes(4, "big") + bytes([FLAG_COMPRESSED]) + body
    return (len(payload) + 1).to_bytes(4, "big") + b"\x00" + payload


def inflate(body: bytes, limit: int) -> bytes:
    """Inflates a zlib stream, failing as soon as it passes ``limit`` bytes;
    a truncated stream or bytes after its end are errors."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as err:
        raise FrameError(f"corrupt zlib body: {err}") from err
    if len(out) > limit or inflater.unconsumed_tail:
        raise FrameError(f"compressed body inflates past the limit of {limit} bytes")
    if not inflater.eof:
        raise FrameError("the zlib stream ends before its body does (truncated)")
    if inflater.unused_data:
        raise FrameError("bytes after the end of the zlib stream")
    return out


def _payload(flags: int, body: bytes, limits: Limits) -> bytes:
    if flags & ~FLAG_COMPRESSED:
        raise FrameError(f"unknown flag bits {flags}")
    return inflate(body, limits.max_decompressed_len) if flags & FLAG_COMPRESSED else body


def _check_length(length: int, limits: Limits) -> None:
    if length == 0:
        raise FrameError("frame length is zero")
    if length > limits.max_frame_len:
        raise FrameError(f"frame of {length} bytes exceeds the limit of {limits.max_frame_len}")


def _whole(frame: bytes, limits: Limits) -> tuple[int, bytes]:
    """The flags and body of one whole frame, its length checked."""
    if len(frame) < HEADER_LEN:
        raise FrameError(f"a frame of {len(frame)} bytes is shorter than its header")
    length = int.from_bytes(frame[:4], "big")
    _check_length(length, limits)
    if length != len(frame) - 4:
        raise FrameError("a message must hold exactly one frame")
    return frame[4], frame[HEADER_LEN:]


def split_frame(frame: bytes, limits: Limits = DEFAULT_LIMITS) -> tuple[bool, bytes]:
    """One whole frame's ``(compressed, body)``, checked."""
    flags, body = _whole(frame, limits)
    if flags & ~FLAG_COMPRESSED:
        raise FrameError(f"unknown flag bits {flags}")
    return bool(flags & FLAG_COMPRESSED), body


def decode_frame(frame: bytes, limits: Limits = DEFAULT_LIMITS) -> bytes:
    """The payload of one whole frame (a WebSocket message), inflated if
    need be."""
    return _payload(*_whole(frame, limits), limits)


class FrameDecoder:
    """Cuts a byte stream (TCP) into payloads. ``feed`` takes whatever
    arrived and returns the payloads it completed; a frame's length is
    checked as soon as its 4 bytes are in, before its body is buffered."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            length = int.from_bytes(self.buf[:4], "big")
            _check_length(length, self.limits)
            if len(self.buf) < 4 + length:
                break
            flags, body = self.buf[4], bytes(self.buf[HEADER_LEN : 4 + length])
            del self.buf[: 4 + length]
            out.append(_payload(flags, body, self.limits))
        return out

    def pending(self) -> int:
        """Bytes of a frame not yet complete."""
        return len(self.buf)


@dataclass(frozen=True)
class Envelope:
    """A message: its channel, its action and its content's bytes (decode
    them with the action's schema)."""

    channel: int
    action: int
    content: bytes


def decode_envelope(payload: bytes) -> Envelope:
    r = Reader(payload)
    try:
        channel = r.varint(16)
        action = r.varint(16)
    except ValueError as err:
        raise FrameError(f"bad message envelope: {err}") from err
    return Envelope(channel, action, bytes(payload[r.pos :]))


def encode_envelope(channel: int, action: int, schema: Schema, value: object) -> bytes:
    """The payload of a message: channel, action, then ``value`` encoded with
    ``schema``."""
    w = Writer()
    w.varint(channel)
    w.varint(action)
    schema.write(w, value)
    return w.bytes()


def encode_message(channel: int, action: int, schema: Schema, value: object) -> bytes:
    """A whole frame of a message, compressed when that pays."""
    return encode_frame(encode_envelope(channel, action, schema, value), COMPRESS_THRESHOLD)
