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


async def give_turn() -> None:
    """Let the I/O that arrived while this task held the loop be read before it goes on.

    ``asyncio.sleep(0)`` is not enough: it queues this task's next step ahead of the I/O the loop's
    next poll finds. A timer that is due at once is run after that I/O's callbacks, on every asyncio
    loop, so a request that arrived meanwhile is read now and served within one more step (at most
    :data:`LOOP_HOLD_SECONDS` later).
    """
    await asyncio.sleep(_DUE_AT_ONCE)
