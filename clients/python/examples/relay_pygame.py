"""A small pygame client for the relay: you are the white dot, arrow keys
move you, everyone else in your zone is a coloured dot (the browser demo's
world: 100 × 75 units). Needs pygame (``pip install pygame``).

    python3 examples/relay_pygame.py 127.0.0.1:7200 ada [ZONE] [--frames N]

``--frames N`` stops after N frames (with ``SDL_VIDEODRIVER=dummy``, a run
without a screen: what the tests do).
"""

from __future__ import annotations

import asyncio
import sys

try:
    import pygame
except ImportError:
    sys.exit("this example needs pygame: pip install pygame")

from switchboard_client.relay import RelayClient

WORLD = (100.0, 75.0)
SCREEN = (800, 600)
SPEED = 20.0  # units a second


def to_screen(position: list[float]) -> tuple[int, int]:
    return (int(position[0] / WORLD[0] * SCREEN[0]), int(position[2] / WORLD[1] * SCREEN[1]))


async def play(addr: str, name: str, zone: str, frames: int | None) -> int:
    relay = await RelayClient.connect(addr, name=name)
    pygame.init()
    screen = pygame.display.set_mode(SCREEN)
    pygame.display.set_caption(f"Switchboard relay: {name} in {zone} (id {relay.id})")
    me = [WORLD[0] / 2, 0.0, WORLD[1] / 2]
    clock = pygame.time.Clock()
    since_sent, frame = 1.0, 0
    while frames is None or frame < frames:
        frame += 1
        if any(event.type == pygame.QUIT for event in pygame.event.get()):
            break
        dt = clock.tick(60) / 1000
        keys = pygame.key.get_pressed()
        dx = (keys[pygame.K_RIGHT] - keys[pygame.K_LEFT]) * SPEED * dt
        dz = (keys[pygame.K_DOWN] - keys[pygame.K_UP]) * SPEED * dt
        me[0] = min(max(me[0] + dx, 0.0), WORLD[0])
        me[2] = min(max(me[2] + dz, 0.0), WORLD[1])
        since_sent += dt
        # On every move, and once a second standing still (the others see
        # who is here).
        if dx or dz or since_sent >= 1.0:
            relay.move(me, zone=zone)
            since_sent = 0.0
        screen.fill((20, 24, 32))
        for player_id, relayed in relay.players.items():
            colour = ((player_id * 97) % 200 + 55, (player_id * 57) % 200 + 55, 180)
            pygame.draw.circle(screen, colour, to_screen(relayed["transform"]["position"]), 6)
        pygame.draw.circle(screen, (255, 255, 255), to_screen(me), 7)
        pygame.display.flip()
        # The relay's messages are read while the loop waits for the frame.
        await asyncio.sleep(0)
    print(f"{name} (id {relay.id}) saw {len(relay.players)} other players in {zone}", flush=True)
    pygame.quit()
    await relay.close("bye")
    return 0


def main() -> int:
    args = sys.argv[1:]
    frames = None
    if "--frames" in args:
        at = args.index("--frames")
        frames = int(args[at + 1])
        del args[at : at + 2]
    if len(args) not in (2, 3):
        sys.exit(__doc__)
    zone = args[2] if len(args) == 3 else "demo"
    return asyncio.run(play(args[0], args[1], zone, frames))


if __name__ == "__main__":
    sys.exit(main())
