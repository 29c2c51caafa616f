"""What a backend may send: the bounds, and the exchange that enforces them.

A legacy server may be broken or hostile. Whatever it sends is held in memory until the call
driver takes it, and a round of server requests stays open for as long as requests keep arriving
inside the batch window, so each of these is bounded:

* one message (an SSE event, a JSON body, a stdio line): ``max_message_bytes``;
* one round: the server requests and the messages the driver gathers into one input round
  (``max_round_requests``, ``max_round_messages``, ``max_round_bytes``). A round is what the
  driver takes with :meth:`Exchange.poll` after the :meth:`Exchange.next` that started it;
* the queue of an exchange nobody is reading (a held call): ``max_queued_messages`` and
  ``max_queued_bytes``. The final response is never refused by these: it ends the exchange and
  ``max_message_bytes`` already bounds it.

Past a bound the exchange fails with :class:`~gateway.errors.BackendUnavailable` (reason
``backend_flood``): what it had queued is dropped at once, the next read raises, and the session
that fed it is marked broken so the pool closes it instead of handing it on.

The standalone GET stream of a streamable-HTTP session is bounded by ``stream_idle_timeout``
(silence before it is reopened) and ``stream_reconnects`` (consecutive reopenings that delivered
no message before the stream is given up).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import BackendUnavailable
from gateway.legacy.session import Exchange, ExchangeEvent, FinalResponse, ServerRequest

FLOOD_REASON = "backend_flood"


@dataclass(frozen=True, slots=True)
class BackendLimits:
    """Per-route bounds on what a backend may send (``routes[].backend.limits`` in the config)."""

    max_message_bytes: int = 16 * 1024 * 1024
    max_round_requests: int = 64
    max_round_messages: int = 1024
    max_round_bytes: int = 8 * 1024 * 1024
    max_queued_messages: int = 1024
    max_queued_bytes: int = 16 * 1024 * 1024
    stream_idle_timeout: float = 300.0
    stream_reconnects: int = 5


def _request_key(request_id: Any) -> str:
    """Server request ids are whatever JSON the backend chose (even unhashable ones)."""
    return f"{type(request_id).__name__}:{request_id!r}"[:200]


@dataclass(eq=False)
class BoundedExchange(Exchange):
    """An :class:`Exchange` whose queue, rounds and outstanding server requests are bounded."""

    limits: BackendLimits = field(default_factory=BackendLimits)
    on_flood: Callable[[str], None] | None = None
    """Told (with the detail) when a bound is crossed; the session marks itself broken."""
    _sizes: list[int] = field(default_factory=list)
    """The wire size of each queued event, in queue order (a list: see :mod:`gateway.legacy.events`)."""
    _queued_bytes: int = 0
    _round_requests: int = 0
    _round_messages: int = 0
    _round_bytes: int = 0

    def push_sized(self, event: ExchangeEvent | BackendUnavailable, size: int) -> None:
        """Queue ``event`` (``size`` bytes on the wire), or fail the exchange past a queue bound."""
        if self.done or self.answered:
            super().push(event)  # not queued; a server request is answered (Exchange.unanswered)
            return
        if not isinstance(event, FinalResponse | BackendUnavailable):
            limits = self.limits
            if self.queue.qsize() >= limits.max_queued_messages:
                self._flood(f"more than {limits.max_queued_messages} unread messages")
                return
            if self._queued_bytes + size > limits.max_queued_bytes:
                self._flood(f"more than {limits.max_queued_bytes} unread bytes")
                return
        self._sizes.append(size)
        self._queued_bytes += size
        super().push(event)

    def push(self, event: ExchangeEvent | BackendUnavailable) -> None:
        self.push_sized(event, 0)

    async def next(self, timeout: float) -> ExchangeEvent:
        """The first event of a round (or of a plain call): the round's counts start again."""
        self._round_requests = self._round_messages = self._round_bytes = 0
        return await super().next(timeout)

    def _take(self, item: ExchangeEvent | BackendUnavailable) -> ExchangeEvent:
        size = self._sizes.pop(0) if self._sizes else 0
        self._queued_bytes -= size
        event = super()._take(item)
        if isinstance(event, FinalResponse):
            return event
        self._round_messages += 1
        self._round_bytes += size
        if isinstance(event, ServerRequest):
            self._round_requests += 1
        limits = self.limits
        problem = None
        if self._round_requests > limits.max_round_requests:
            problem = f"more than {limits.max_round_requests} server requests in one round"
        elif self._round_messages > limits.max_round_messages:
            problem = f"more than {limits.max_round_messages} messages in one round"
        elif self._round_bytes > limits.max_round_bytes:
            problem = f"more than {limits.max_round_bytes} bytes in one round"
        if problem is not None:
            self._flood(problem)
            return self._take(self.queue.get_nowait())  # raises the failure just queued
        return event

    def _flood(self, detail: str) -> None:
        """Drop what is queued, fail the exchange, and tell the session it must not be reused."""
        while not self.queue.empty():
            self.queue.get_nowait()
        self._sizes.clear()
        self._queued_bytes = 0
        self.answered = False  # let the failure in even if the final response was queued
        super().push(BackendUnavailable(FLOOD_REASON, detail))
        self._sizes.append(0)
        if self.on_flood is not None:
            self.on_flood(detail)
