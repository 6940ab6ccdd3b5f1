"""One Switchboard connection over TCP (docs/PROTOCOL.md, sections 1-5): the
hello handshake, pings and pongs, the close frame with its code and reason,
keep-alive and the idle timeout. What the Rust ``ExtendedTcpSocket`` is.

    conn = await Connection.open("127.0.0.1", 7000)
    conn.send(16, 1, STRING, "hello")
    envelope = await conn.recv()       # None once closed; conn.closed says why

A server on another machine is spoken to in TLS 1.3 (section 1a), checked by
its pinned SHA-256 fingerprint (``ConnectionConfig.trust``, as the server
prints it: ``tls: sha256 ...``) or else by the platform's CA roots.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import ssl
import time
from collections import deque
from dataclasses import dataclass

from .bincode import STRING, U16, U64, Reader, struct
from .frame import (
    DEFAULT_LIMITS,
    Envelope,
    FrameDecoder,
    FrameError,
    Limits,
    decode_envelope,
    encode_frame,
    encode_message,
)

PROTOCOL_VERSION = 1
MAGIC = b"SWBD"
HELLO_FRAME = encode_frame(MAGIC + PROTOCOL_VERSION.to_bytes(2, "big"))

SYSTEM_CHANNEL = 0
PING, PONG, CLOSE = 1, 2, 3
CloseContent = struct(code=U16, reason=STRING)


class CloseCode:
    """Close codes (section 4)."""

    NORMAL = 1000
    GOING_AWAY = 1001
    PROTOCOL_ERROR = 1002
    VERSION_MISMATCH = 1003
    ABUSE = 1007
    SLOW_CONSUMER = 1008
    REFUSED = 1010
    TIMEOUT = 1011
    REPLACED = 1012
    SERVER_FULL = 1013
    KICKED = 4000


@dataclass(frozen=True)
class Closed:
    """How a connection ended: ``code`` and ``reason`` of the close frame
    (``code`` None when it broke without one: ``lost``), and who closed it."""

    code: int | None
    reason: str
    by_peer: bool
    lost: bool = False


@dataclass
class ConnectionConfig:
    """A connection's timing and limits (the Rust ``SocketConfig``'s)."""

    keepalive: float = 5.0
    idle_timeout: float = 15.0
    handshake_timeout: float = 5.0
    connect_timeout: float = 5.0
    limits: Limits = DEFAULT_LIMITS
    #: TLS under the frames: ``None`` (the default) speaks it to any host
    #: that is not this machine's, ``True`` always, ``False`` never (plain to
    #: another machine sends everything in the clear).
    tls: bool | None = None
    #: The server's SHA-256 fingerprint (64 hex digits, colons allowed): it
    #: is trusted by it alone. Without it, the platform's CA roots and the
    #: host name decide.
    trust: str | None = None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine (``localhost`` or a loopback address)."""
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or bool(mapped and mapped.is_loopback)


def _tls_context(config: ConnectionConfig) -> ssl.SSLContext:
    """TLS 1.3; with a pin, the certificate is checked against it after
    the handshake (not by a CA)."""
    context = ssl.create_default_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    if config.trust is not None:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _check_pin(writer: asyncio.StreamWriter, config: ConnectionConfig, server: str) -> None:
    """Raises ``ConnectionError`` unless the server presented the pinned key."""
    if config.trust is None:
        return
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    presented = hashlib.sha256(der).hexdigest()
    pinned = config.trust.lower().removeprefix("sha256:").replace(":", "")
    if presented != pinned:
        raise ConnectionError(
            f"{server} presented the key {presented}, not the pinned {pinned}: someone may be "
            "in the middle, or the server has a new key"
        )


def join_frame(code: str) -> bytes:
    """The join-code relay's join frame: ``SWJN`` and the code, raw."""
    payload = b"SWJN" + code.encode("ascii")
    return (len(payload) + 1).to_bytes(4, "big") + b"\x00" + payload


def split_join(addr: str) -> tuple[str | None, str]:
    """``"CODE@host:port"`` → ``("CODE", "host:port")``; any other address
    → ``(None, addr)``."""
    code, at, rest = addr.partition("@")
    if at and "://" not in addr and code.strip():
        return code.strip(), rest
    return None, addr


class Connection:
    """An open connection. ``recv`` returns the next application message,
    answering pings itself; ``None`` once closed (:attr:`closed` says why)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, config: ConnectionConfig) -> None:
        self._reader = reader
        self._writer = writer
        self.config = config
        self._decoder = FrameDecoder(config.limits)
        self._inbox: deque[bytes] = deque()
        self._reading = False
        #: Set by close() before the goodbye goes: the end it meant.
        self._closing: Closed | None = None
        self.closed: Closed | None = None
        self.rtt: float | None = None
        self._opened = time.monotonic()
        self._last_sent = self._last_heard = self._opened
        self._keepalive = asyncio.get_running_loop().create_task(self._keep_alive())

    @classmethod
    async def open(cls, host: str, port: int, config: ConnectionConfig | None = None, *, join_code: str | None = None) -> "Connection":
        """Connects and completes the handshake; raises ``ConnectionError``
        (a refused or timed-out connect, a peer that is not a Switchboard
        peer or speaks another version). With ``join_code``, ``host:port``
        is a join-code relay and the game of that code is joined through
        it (docs/PROTOCOL.md section 12)."""
        config = config or ConnectionConfig()
        tls = config.tls if config.tls is not None else not is_loopback(host)
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), config.connect_timeout)
        except (OSError, asyncio.TimeoutError) as err:
            raise ConnectionError(f"connect to {host}:{port} failed: {err or 'timed out'}") from err
        if join_code is not None:
            writer.write(join_frame(join_code))
        if tls:
            # After the join frame, if any: TLS with the host itself, end
            # to end through a join-code relay.
            try:
                await asyncio.wait_for(
                    writer.start_tls(_tls_context(config), server_hostname=host.strip("[]")),
                    config.handshake_timeout,
                )
            except ssl.SSLError as err:
                writer.close()
                raise ConnectionError(
                    f"TLS with {host}:{port} failed ({err.reason or err}): a plain server answers "
                    "in plaintext; a self-signed one needs its fingerprint pinned (trust=...)"
                ) from err
            except (OSError, asyncio.TimeoutError) as err:
                writer.close()
                raise ConnectionError(f"TLS with {host}:{port} failed: {err or 'timed out'}") from err
            try:
                _check_pin(writer, config, f"{host}:{port}")
            except ConnectionError:
                writer.close()
                raise
        writer.write(HELLO_FRAME)
        try:
            hello = await asyncio.wait_for(_read_hello(reader), config.handshake_timeout)
        except asyncio.TimeoutError as err:
            writer.close()
            raise ConnectionError("no hello from the server in time") from err
        except (FrameError, OSError, asyncio.IncompleteReadError) as err:
            writer.close()
            raise ConnectionError(f"the peer is not a Switchboard peer: {err}") from err
        if hello[:4] != MAGIC or len(hello) != 6:
            writer.close()
            raise ConnectionError("the peer is not a Switchboard peer")
        theirs = int.from_bytes(hello[4:6], "big")
        if theirs != PROTOCOL_VERSION:
            conn = cls(reader, writer, config)
            await conn.close(f"protocol version mismatch: ours {PROTOCOL_VERSION}, theirs {theirs}", CloseCode.VERSION_MISMATCH)
            raise ConnectionError(f"protocol version mismatch: ours {PROTOCOL_VERSION}, theirs {theirs}")
        return cls(reader, writer, config)

    def send(self, channel: int, action: int, schema, value) -> None:
        """Queues a message; raises ``ConnectionError`` once closed."""
        self.send_frame(encode_message(channel, action, schema, value))

    def send_frame(self, frame: bytes) -> None:
        if self.closed is not None:
            raise ConnectionError(f"the connection is closed: {self.closed.reason}")
        self._writer.write(frame)
        self._last_sent = time.monotonic()

    async def recv(self) -> Envelope | None:
        """The next message of another channel than the system's; ``None``
        once the connection is closed."""
        while self.closed is None:
            if self._inbox:
                payload = self._inbox.popleft()
                try:
                    message = decode_envelope(payload)
                except FrameError as err:
                    await self._fail(CloseCode.PROTOCOL_ERROR, str(err))
                    return None
                if message.channel != SYSTEM_CHANNEL:
                    return message
                await self._system(message)
                continue
            self._reading = True
            try:
                data = await self._reader.read(65536)
            except OSError as err:
                self._finish(self._closing or Closed(None, f"connection lost: {err}", by_peer=False, lost=True))
                return None
            finally:
                self._reading = False
            if not data:
                lost = Closed(None, "connection lost: the peer hung up without a goodbye", by_peer=False, lost=True)
                self._finish(self._closing or lost)
                return None
            self._last_heard = time.monotonic()
            try:
                self._inbox.extend(self._decoder.feed(data))
            except FrameError as err:
                await self._fail(CloseCode.PROTOCOL_ERROR, str(err))
                return None
        return None

    async def _system(self, message: Envelope) -> None:
        if message.action == PING:
            # The stamp goes back as it came.
            self.send_frame(encode_frame(bytes([SYSTEM_CHANNEL, PONG]) + message.content))
        elif message.action == PONG:
            try:
                sent = U64.read(Reader(message.content))
                self.rtt = max(0.0, (time.monotonic() - self._opened) - sent / 1000)
            except ValueError:
                pass
        elif message.action == CLOSE:
            try:
                close = CloseContent.read(Reader(message.content))
            except ValueError:
                close = {"code": CloseCode.PROTOCOL_ERROR, "reason": "bad close frame"}
            self._finish(Closed(close["code"], close["reason"], by_peer=True))

    async def close(self, reason: str = "closed", code: int = CloseCode.NORMAL) -> None:
        """Closes gracefully: what was queued, then the close frame, then the
        write half; waits briefly for the peer to hang up."""
        if self.closed is not None or self._closing is not None:
            return
        self._closing = Closed(code, reason, by_peer=False)
        try:
            self._writer.write(encode_message(SYSTEM_CHANNEL, CLOSE, CloseContent, {"code": code, "reason": reason}))
            await asyncio.wait_for(self._writer.drain(), 2)
            if self._writer.can_write_eof():
                self._writer.write_eof()
            # Keep reading until the peer hangs up (hanging up first could
            # reset the connection and lose the close frame in flight);
            # when a recv() is reading, it sees the end itself.
            if not self._reading:
                await asyncio.wait_for(self._reader.read(), 2)
        except (OSError, asyncio.TimeoutError, FrameError):
            pass
        self._finish(self._closing)

    def drop(self) -> None:
        """Hangs up without a goodbye, as a network failure would (tests)."""
        self._writer.transport.abort()

    async def _fail(self, code: int, reason: str) -> None:
        await self.close(reason, code)

    def _finish(self, closed: Closed) -> None:
        if self.closed is None:
            self.closed = closed
        self._keepalive.cancel()
        self._writer.close()

    async def _keep_alive(self) -> None:
        tick = min(self.config.keepalive, 1.0)
        while self.closed is None:
            await asyncio.sleep(tick)
            now = time.monotonic()
            if now - self._last_heard > self.config.idle_timeout:
                asyncio.get_running_loop().create_task(self._fail(CloseCode.TIMEOUT, "idle timeout"))
                return
            if now - self._last_sent >= self.config.keepalive:
                stamp = int((now - self._opened) * 1000)
                try:
                    self.send_frame(encode_message(SYSTEM_CHANNEL, PING, U64, stamp))
                except ConnectionError:
                    return


async def _read_hello(reader: asyncio.StreamReader) -> bytes:
    """The peer's first frame, read with a 64-byte limit."""
    header = await reader.readexactly(5)
    length = int.from_bytes(header[:4], "big")
    if length == 0 or length > 64 or header[4] != 0:
        raise FrameError("the peer is not a Switchboard peer")
    return await reader.readexactly(length - 1)
