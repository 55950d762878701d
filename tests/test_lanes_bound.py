"""Session lanes keep a lock only while a turn of the session runs or waits: a resident that lives for months
(every automation run and helper is a session of its own) does not collect one per session ever seen."""

import asyncio

from gateway.turns.lanes import Lanes


async def test_a_lane_is_forgotten_once_nobody_holds_or_waits_for_it(store):
    lanes = Lanes(store)
    order: list[str] = []
    release = asyncio.Event()

    async def turn(session: str, name: str) -> None:
        async with lanes.hold(session):
            order.append(f"{name} in")
            await release.wait()
            order.append(f"{name} out")

    first = asyncio.create_task(turn("s", "first"))
    second = asyncio.create_task(turn("s", "second"))  # waits for the first: one turn at a time per session
    await asyncio.sleep(0.01)
    assert order == ["first in"] and lanes.sessions == 1
    release.set()
    await asyncio.gather(first, second)
    assert order == ["first in", "first out", "second in", "second out"]
    for i in range(1_000):  # a thousand sessions, one turn each
        async with lanes.hold(f"automation:{i}"):
            pass
    assert lanes.sessions == 0
