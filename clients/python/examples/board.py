"""A terminal client for Switchboard's built-in board game (``switchboard-server``
with no subcommand), on the game-loop client: a loop that polls once a
"frame", typed commands read on a thread of their own.

    python3 examples/board.py 127.0.0.1:7000 ada
    > say hello          a line to everyone
    > claim 3            take seat 3
    > release            give the seat up
    > set colour blue    set a key of the board
    > quit

Every update is printed as it is delivered; a rejected command prints the
server's reason.
"""

from __future__ import annotations

import queue
import sys
import threading
import time

from switchboard_client.bincode import BOOL, STRING, U8, UNIT, UUID, map_of, struct
from switchboard_client.game import ACCEPTED, GameClient

BOARD = 16
SAY, SET, CLAIM, RELEASE = 1, 3, 4, 5
LINE, CHANGED, SNAPSHOT, SEATS, PRESENCE = 10, 11, 12, 13, 14

Line = struct(**{"from": UUID, "name": STRING, "text": STRING, "private": BOOL})
SetValue = struct(key=STRING, value=STRING)
Changed = struct(key=STRING, value=STRING, by=UUID)
Seats = map_of(U8, UUID)
Snapshot = struct(you=UUID, board=map_of(STRING, STRING), seats=Seats, players=map_of(UUID, STRING))
Presence = struct(client=UUID, name=STRING, status=STRING)


def main(addr: str, name: str) -> int:
    client = GameClient(addr, name)
    names: dict[str, str] = {}
    out = lambda text: print(text, flush=True)  # noqa: E731 - one line each

    def snapshot(s: dict) -> None:
        names.update(s["players"])
        out(f"* on the board: {', '.join(sorted(names.values()))}; seats {dict(sorted((k, names.get(v, v)) for k, v in s['seats'].items()))}")

    def presence(p: dict) -> None:
        names[p["client"]] = p["name"]
        out(f"* {p['name']} {p['status']}")

    client.welcomed.connect(lambda w: out(f"* welcome{' back' if w['resumed'] else ''}, {name}"))
    client.connection_lost.connect(lambda closed: out(f"* connection lost ({closed.reason}); reconnecting"))
    client.disconnected.connect(lambda closed: out(f"* disconnected: {closed.reason}"))
    client.refused.connect(lambda refusal: out(f"* refused: {refusal['reason']}"))
    client.subscribe(BOARD, LINE, Line, lambda line: out(f"{line['name']}: {line['text']}"))
    client.subscribe(BOARD, CHANGED, Changed, lambda c: out(f"* {names.get(c['by'], '?')} set {c['key']} = {c['value']}"))
    client.subscribe(BOARD, SEATS, Seats, lambda seats: out(f"* seats: {dict(sorted((k, names.get(v, v)) for k, v in seats.items()))}"))
    client.subscribe(BOARD, SNAPSHOT, Snapshot, snapshot)
    client.subscribe(BOARD, PRESENCE, Presence, presence)
    labels: dict[int, str] = {}
    client.request_done.connect(
        lambda ticket, verdict: verdict is ACCEPTED or out(f"{labels.pop(ticket, '?')}: {getattr(verdict, 'reason', verdict)}")
    )

    typed: queue.SimpleQueue = queue.SimpleQueue()

    def read_stdin() -> None:
        for line in sys.stdin:
            typed.put(line.strip())
        typed.put("quit")

    threading.Thread(target=read_stdin, daemon=True).start()
    # Orders wait for the welcome.
    while client.client_id is None and client.closed is None:
        client.poll()
        time.sleep(0.01)
    while client.closed is None:
        client.poll()
        try:
            command = typed.get(timeout=1 / 60)
        except queue.Empty:
            continue
        word, _, rest = command.partition(" ")
        if word == "quit":
            break
        if word == "say" and rest:
            labels[client.request(BOARD, SAY, STRING, rest)] = command
        elif word == "claim" and rest.isdigit() and int(rest) < 256:
            labels[client.request(BOARD, CLAIM, U8, int(rest))] = command
        elif word == "release":
            labels[client.request(BOARD, RELEASE, UNIT, None)] = command
        elif word == "set" and len(rest.split(" ", 1)) == 2:
            key, value = rest.split(" ", 1)
            labels[client.request(BOARD, SET, SetValue, {"key": key, "value": value})] = command
        elif command:
            out("? say TEXT | claim N | release | set KEY VALUE | quit")
    # What is still on its way (a last verdict), then goodbye.
    deadline = time.monotonic() + 1
    while labels and time.monotonic() < deadline:
        client.poll()
        time.sleep(0.01)
    client.close("quit")
    client.poll()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: board.py HOST:PORT NAME")
    sys.exit(main(sys.argv[1], sys.argv[2]))
