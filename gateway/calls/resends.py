"""Resends of a retry: the same request sent again gets the answer the first send got.

A retry takes its hold once (single use): that is what keeps a live owner from applying an answer
twice. But a client, a proxy or a balancer that did not receive the answer (a timeout, a reset
connection, a replica that died while relaying it) can only send the same request again, and a
2026-07-28 client has no session to recover with. So the replica that ran a retry remembers, per
``(hold id, round)``, what its first send was (a digest of the principal and the
``inputResponses``) and what it was answered (the next round's ``InputRequiredResult``, the final
result, or the JSON-RPC error), once the requestState it carried is spent (its hold moved on to
the next round or ended). A resend of that state:

* with the same principal and ``inputResponses`` gets that answer again, byte for byte (``resends_total``
  ``answered``); one that arrives while the first is still running waits for it (``waited``);
* that differs (other answers, another principal) is refused as a stale state is
  (``invalid_request_state``, reason ``resend_differs``; ``differs``);
* whose first answer was not kept (larger than ``limits.resend_answer_max_bytes``, or dropped to make
  room) gets HTTP 409, ``data.reason`` ``already_answered`` (``not_kept``): the call went on, and the
  client must start it again.

The first send runs in the gateway's background group, not in its request's task: a client (or a
relaying replica) that goes away mid-retry does not abandon the call, so the answer is there for its
resend. A send whose state is still valid afterwards (its answers were refused before anything reached
the backend, or its state was refused) leaves nothing behind: its resend is judged as a new retry.

Bounds: ``limits.resend_memory_entries`` entries (those still running included) and
``limits.resend_memory_bytes`` bytes of kept answers, the oldest dropped first; each entry lives for
its route's ``holds.ttl``, the lifetime of the state it answers.

Cost: about 40 µs of CPU per retry (the task, the digest, the answer's size; measured at 20,000
retries against a 10,000-entry memory on the shared 2-core machine), under 1 % of a two-round flow's
5.5 ms median round.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from gateway import fastjson
from gateway.calls.request import Call
from gateway.errors import AlreadyAnswered, GatewayError, InvalidRequestState, Overloaded
from gateway.legacy.session import JsonObj
from gateway.observability.metrics.forwards import RESEND_DIFFERS, RESEND_NOT_KEPT, RESEND_WAITED, RESENT
from gateway.observability.metrics.registry import Metrics
from gateway.owned import TaskGroup
from gateway.state.claims import Claims

SCAN = 64
"""Most of the oldest entries one bound check looks at (those still running are stepped over)."""
ERROR_SIZE = 512
"""Bytes an error answer is counted as (its message and data are small and fixed)."""

Key = tuple[str, int]


@dataclass(slots=True)
class _Entry:
    fingerprint: bytes
    expires: float
    done: asyncio.Event = field(default_factory=asyncio.Event)
    answer: JsonObj | None = None
    error: GatewayError | None = None
    size: int = 0
    kept: bool = False
    """The first send's answer is here to give again (else, once ``done``: ``already_answered``)."""


class Resends:
    """The answers of retries whose state they spent, for their resends; bounded in count, bytes and time."""

    def __init__(
        self,
        *,
        group: TaskGroup,
        metrics: Metrics,
        max_entries: int,
        max_bytes: int,
        max_answer_bytes: int,
    ) -> None:
        self._group = group
        self._metrics = metrics
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._max_answer_bytes = max_answer_bytes
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        return self._bytes

    async def answer(
        self,
        call: Call,
        claims: Claims,
        run: Callable[[], Awaitable[JsonObj]],
        *,
        spent: Callable[[], bool],
        refuse: Callable[[str], GatewayError],
    ) -> JsonObj:
        """The answer to the retry ``claims`` carries: the first send's again, or ``run()``'s.

        ``spent()`` says, once ``run()`` has ended, whether the state can no longer serve a retry (only
        then is the answer kept); ``refuse(reason)`` is the state boundary's refusal, for a resend that
        differs."""
        key = (claims.hold_id, claims.round)
        fingerprint = _fingerprint(call, claims)
        route = call.route.name
        while (entry := self._live(key)) is not None:
            if entry.fingerprint != fingerprint:
                self._metrics.resends.labels(route, RESEND_DIFFERS).inc()
                raise refuse("resend_differs")
            if not entry.done.is_set():
                self._metrics.resends.labels(route, RESEND_WAITED).inc()
                await entry.done.wait()
                continue  # kept, not kept, or gone (the state stayed valid: run as a new retry)
            return self._again(route, entry)
        entry = _Entry(fingerprint, time.monotonic() + call.route.config.holds.ttl)
        if not self._make_room(key, entry):
            return await run()  # every place taken by a retry still running: no memory of this one
        self._group.spawn(self._first(key, entry, run, spent), name="retry")
        await entry.done.wait()  # cancelled (the client went away), the retry runs on for its resend
        if entry.error is not None:
            raise entry.error
        assert entry.answer is not None
        return entry.answer

    async def _first(
        self, key: Key, entry: _Entry, run: Callable[[], Awaitable[JsonObj]], spent: Callable[[], bool]
    ) -> None:
        """Run the first send to its end, and keep its answer if its state is spent. A refusal, or a
        capacity error (nothing was done: the client is told to retry), is not kept."""
        keep = False
        try:
            try:
                entry.answer = await run()
                entry.size = len(fastjson.dumps(entry.answer))
            except GatewayError as exc:
                entry.error, entry.size = exc, ERROR_SIZE
            keep = not isinstance(entry.error, InvalidRequestState | Overloaded) and spent()
        finally:
            if entry.answer is None and entry.error is None:  # cancelled at shutdown, or a bug (logged)
                entry.error = GatewayError()
            if not keep:
                self._forget(key, entry)
            elif entry.size <= self._max_answer_bytes:
                entry.kept = True
                self._bytes += entry.size
                self._shrink()
            entry.done.set()
            self._metrics.resend_memory_bytes.set(self._bytes)

    def _again(self, route: str, entry: _Entry) -> JsonObj:
        if not entry.kept:
            self._metrics.resends.labels(route, RESEND_NOT_KEPT).inc()
            raise AlreadyAnswered("answer_not_kept")
        self._metrics.resends.labels(route, RESENT).inc()
        if entry.error is not None:
            raise entry.error
        assert entry.answer is not None
        return entry.answer

    def _live(self, key: Key) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None and entry.expires <= time.monotonic():
            self._forget(key, entry)
            return None
        return entry

    def _make_room(self, key: Key, entry: _Entry) -> bool:
        """Add ``entry``, dropping the oldest finished (or expired) entries past the count bound; False
        when the oldest entries are all retries still running."""
        if len(self._entries) >= self._max_entries:
            self._drop_oldest(lambda: len(self._entries) < self._max_entries)
            if len(self._entries) >= self._max_entries:
                return False
        self._entries[key] = entry
        return True

    def _shrink(self) -> None:
        """Drop kept answers, oldest first, until their bytes fit."""
        self._drop_oldest(lambda: self._bytes <= self._max_bytes)

    def _drop_oldest(self, enough: Callable[[], bool]) -> None:
        """Forget the oldest entries that are finished or expired until ``enough()`` holds and the
        oldest left has not expired. Only the :data:`SCAN` oldest are looked at: a call costs a few
        steps, not one per entry kept (at 10,000 entries, a whole pass per retry cost 11 ms)."""
        now = time.monotonic()
        for key, entry in list(itertools.islice(self._entries.items(), SCAN)):
            if enough() and entry.expires > now:
                return
            if entry.done.is_set() or entry.expires <= now:
                self._forget(key, entry)

    def _forget(self, key: Key, entry: _Entry) -> None:
        if self._entries.get(key) is entry:
            del self._entries[key]
        if entry.kept:
            self._bytes -= entry.size
            entry.kept = False  # a resend still waiting on it hears already_answered


def _fingerprint(call: Call, claims: Claims) -> bytes:
    """What a resend must repeat: the principal and the ``inputResponses`` (the arguments and the rest
    of the call are bound by the state itself)."""
    digest = hashlib.sha256((call.caller.principal or "").encode("utf-8", "surrogatepass"))
    digest.update(b"\n")
    digest.update(fastjson.dumps(call.request.input_responses))
    return digest.digest()
