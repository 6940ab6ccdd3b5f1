"""A Python client for Switchboard servers (docs/PYTHON.md).

Layout:

| module | what |
|---|---|
| ``bincode`` | bincode 2 "standard" schemas: integers, strings, options, lists, maps, structs, enums |
| ``frame`` | frames (zlib inflated never past a limit), the stream decoder, the message envelope |
| ``schemas`` | the framework's messages: sessions, rooms, the relay |
"""

from .bincode import DecodeError, decode, encode
from .frame import FrameError, Limits

__all__ = ["DecodeError", "FrameError", "Limits", "decode", "encode"]
