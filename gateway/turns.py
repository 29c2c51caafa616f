"""Long work on the event loop, cut into steps: how long one step may hold the loop, and how to
hand it over between two steps.

One step that holds the loop delays every other request by as long (``/healthz`` answers late, and
a liveness probe would see the same). The gateway's longest steps are the ones only a large
message needs - parsing a 4 MiB backend event, its JSON, encoding the answer - and each of those is
followed by :func:`give_turn` once it has held the loop past :data:`LOOP_HOLD_SECONDS`.
"""

from __future__ import annotations

import asyncio
from typing import Final

LOOP_HOLD_SECONDS: Final = 0.002
"""Work that has held the event loop this long hands it over (one indivisible step may overshoot)."""

_DUE_AT_ONCE: Final = 1e-6
"""A timer this short is due at the loop's next iteration, after the I/O that iteration's poll finds."""
_FOLLOWING_STEPS: Final = 2
"""Loop iterations a request needs after its bytes are read before its handler has run: on Python
3.11 aiohttp wakes the connection's task, which then starts the handler's task (3.12 starts tasks
eagerly and needs fewer)."""


async def give_turn() -> None:
    """Let the requests that arrived while this task held the loop be served before it goes on.

    ``asyncio.sleep(0)`` is not enough: it queues this task's next step ahead of the I/O the loop's
    next poll finds, so a request that arrived meanwhile waits for that step, and, as it advances
    one stage per loop iteration, for the steps after it. Waiting first for a timer that is due at
    once puts this task behind that I/O, and the iterations after it behind what the I/O set off, so
    such a request waits for the step it arrived during and no other. It costs a few loop
    iterations (tens of microseconds), taken only after milliseconds of work.
    """
    await asyncio.sleep(_DUE_AT_ONCE)
    for _ in range(_FOLLOWING_STEPS):
        await asyncio.sleep(0)
