"""The queue an :class:`~gateway.legacy.session.Exchange` keeps its events in.

:class:`asyncio.Queue` does more than an exchange needs (bounds, putters, task accounting with an
:class:`asyncio.Event`), and a wait with a deadline around it costs an :func:`asyncio.timeout`
(a cancellation of the waiting task when it fires). Every backend call has one, so this is what
it needs and no more: a list of items, a future per waiting reader, one timer per wait with a
deadline (and, for a round being gathered, a future whose end also ends the wait: its fence).

The items and the waiting readers are lists, not deques. A held call keeps its queue for minutes,
almost always empty, and an empty deque costs 760 bytes (its first block), an empty list 56: each
deque was 0.7 KiB of the ~43 KiB a call held against mcp 1.30.0 costs (``bench.holds --legacy``).
Taking from the front of a list moves the rest; an exchange's queue is bounded
(``max_queued_messages``, 1,024 by default), so that move is at most 8 KiB of pointers, and the
queue holds one or two items in practice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

_T = TypeVar("_T")


class EventQueue(Generic[_T]):
    """The part of :class:`asyncio.Queue` an exchange uses (unbounded, no task accounting), at a
    fraction of its cost per call: a list, and a future per waiting reader.

    Like :meth:`asyncio.Queue.get`, a getter takes its item only once it runs again, so a getter
    cancelled after it was woken leaves the item queued (the next getter is woken instead)."""

    __slots__ = ("_getters", "_items")

    def __init__(self) -> None:
        self._items: list[_T] = []
        self._getters: list[asyncio.Future[bool]] = []

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)

    def holds(self, kind: type) -> bool:
        """Whether an item of ``kind`` is queued."""
        return any(isinstance(item, kind) for item in self._items)

    def get_nowait(self) -> _T:
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.pop(0)

    def put_nowait(self, item: _T) -> None:
        self._items.append(item)
        self._wake_next()

    def _wake_next(self) -> None:
        while self._getters:
            getter = self._getters.pop(0)
            if not getter.done():
                getter.set_result(True)
                return

    async def get(self) -> _T:
        while not self._items:
            await self._wait(None)
        return self._items.pop(0)

    async def get_until(self, deadline: float, *, unless: asyncio.Future[None] | None = None) -> _T | None:
        """The next item, or None once the loop's clock has reached ``deadline`` (or ``unless`` is
        done) with none queued: one timer for the whole wait, no :func:`asyncio.timeout` (no
        cancellation of the task)."""
        loop = asyncio.get_running_loop()
        while not self._items:
            if loop.time() >= deadline or (unless is not None and unless.done()):
                return None
            if not await self._wait(deadline, unless):
                return None
        return self._items.pop(0)

    async def _wait(self, deadline: float | None, unless: asyncio.Future[None] | None = None) -> bool:
        """Until an item is put (True), or ``deadline`` passes or ``unless`` is done (False)."""
        loop = asyncio.get_running_loop()
        getter: asyncio.Future[bool] = loop.create_future()
        self._getters.append(getter)
        timer = None if deadline is None else loop.call_at(deadline, _expire, getter)
        if unless is not None:
            unless.add_done_callback(getter_expiry := _expiry(getter))
        try:
            return await getter
        except asyncio.CancelledError:
            if getter.done() and not getter.cancelled() and getter.result() and self._items:
                self._wake_next()  # woken, but cancelled before it could take the item
            raise
        finally:
            if timer is not None:
                timer.cancel()
            if unless is not None:
                unless.remove_done_callback(getter_expiry)
            if not getter.done():
                getter.cancel()
            if getter in self._getters:  # still in line: timed out or cancelled (a woken one was taken off)
                self._getters.remove(getter)


def _expire(getter: asyncio.Future[bool]) -> None:
    if not getter.done():
        getter.set_result(False)


def _expiry(getter: asyncio.Future[bool]) -> Callable[[asyncio.Future[None]], None]:
    """A done callback that ends ``getter``'s wait as its deadline would."""
    return lambda _: _expire(getter)
