"""The master server's list of game servers (docs/PROTOCOL.md, section 8):
fetched page by page over a Switchboard connection to the master's TCP
port.

    servers = await server_list("127.0.0.1:27900", {"game_type": "board"})
    for server in servers:
        print(server["addr"], server["info"]["name"], server["info"]["players"])
"""

from __future__ import annotations

import asyncio
import ipaddress

from .bincode import BOOL, STRING, U16, U32, Reader, Schema, Writer, option, struct, tuple_of, vec
from .connection import Connection, ConnectionConfig

MASTER_CHANNEL = 16
LIST, PAGE = 1, 2
#: The most servers a browser takes from one list, however many pages.
MAX_SERVERS = 10_000


def _write_addr(w: Writer, addr: str) -> None:
    host, _, port = addr.rpartition(":")
    ip = ipaddress.ip_address(host.strip("[]"))
    w.varint(0 if ip.version == 4 else 1)
    w.raw(ip.packed)
    U16.write(w, int(port))


def _read_addr(r: Reader) -> str:
    kind = r.varint(32)
    if kind == 0:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.IPv4Address(r.raw(4))
        return f"{ip}:{U16.read(r)}"
    if kind == 1:
        ip = ipaddress.IPv6Address(r.raw(16))
        return f"[{ip}]:{U16.read(r)}"
    raise ValueError(f"unknown address kind {kind}")


SocketAddr = Schema(_write_addr, _read_addr, "SocketAddr")
"""A ``SocketAddr`` in bincode's serde form, as "ip:port" text."""

_tags = vec(tuple_of(STRING, STRING), limit=16)
ServerInfo = struct(
    name=STRING,
    game_type=STRING,
    scenario=STRING,
    players=U16,
    max_players=U16,
    bots=U16,
    password=BOOL,
    dedicated=BOOL,
    version=STRING,
    region=STRING,
    tags=_tags,
)
Filter = struct(
    game_type=option(STRING),
    scenario=option(STRING),
    min_players=option(U16),
    max_players=option(U16),
    not_full=BOOL,
    no_password=BOOL,
    dedicated=option(BOOL),
    version=option(STRING),
    region=option(STRING),
    max_bots=option(U16),
    tags=vec(tuple_of(STRING, STRING)),
)
ListRequest = struct(filter=Filter, page=U32, page_size=U16)
Listed = struct(addr=SocketAddr, info=ServerInfo)
ListPage = struct(servers=vec(Listed), page=U32, total=U32)

#: A filter that lets everything through; ``server_list`` fills in what a
#: caller leaves out from it.
NO_FILTER = {
    "game_type": None,
    "scenario": None,
    "min_players": None,
    "max_players": None,
    "not_full": False,
    "no_password": False,
    "dedicated": None,
    "version": None,
    "region": None,
    "max_bots": None,
    "tags": [],
}


async def server_list(
    master: str,
    filter: dict | None = None,
    page_size: int = 100,
    config: ConnectionConfig | None = None,
    timeout: float = 10.0,
) -> list[dict]:
    """Every server the master at ``master`` (its TCP port) lists that
    matches ``filter`` (keys of :data:`NO_FILTER`), ordered by address: a
    list of ``{"addr": "ip:port", "info": {...}}``."""
    host, _, port = master.rpartition(":")
    conn = await Connection.open(host or "127.0.0.1", int(port), config)
    wanted = {**NO_FILTER, **(filter or {})}
    servers: list[dict] = []
    try:
        page = 0
        while True:
            conn.send(MASTER_CHANNEL, LIST, ListRequest, {"filter": wanted, "page": page, "page_size": page_size})
            reply = await asyncio.wait_for(_page(conn), timeout)
            servers += reply["servers"][: MAX_SERVERS - len(servers)]
            page += 1
            if page * page_size >= reply["total"] or not reply["servers"] or len(servers) >= MAX_SERVERS:
                return servers
    finally:
        await conn.close("listed")


async def _page(conn: Connection) -> dict:
    while (message := await conn.recv()) is not None:
        if message.channel == MASTER_CHANNEL and message.action == PAGE:
            r = Reader(message.content)
            page = ListPage.read(r)
            return page
    raise ConnectionError(conn.closed.reason if conn.closed else "the master closed the connection")
