"""In-memory registry of held legacy exchanges.

A *hold* is a backend call paused on server requests the modern client must answer: the leased
session, the open exchange, which backend request ids wait behind which input keys, the round
number and a deadline. The registry enforces four things the sealed state cannot:

* **single use** — a round can be taken once; a second retry with the same (or an older) round's
  state is refused, and a hold in use by one retry is invisible to others;
* **bounds** — a global and a per-principal cap, so abuse cannot grow memory without limit;
* **expiry** — a reaper hands expired holds to ``on_expire``, which answers the backend itself
  (elicitation → cancel, others → error) so the legacy tool finishes and the session is freed;
* **no pinning** — each retry re-arms a hold's TTL, but never past the call's absolute deadline
  (``not_after``), and every round a retry opens counts toward ``max_rounds``, answered or not.
  A hold past either limit is ended like an expired one (:class:`HoldLimitReached`).
"""

from __future__ import annotations

import math
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from gateway.errors import HoldLimitReached, Overloaded
from gateway.owned import TaskGroup

__all__ = [
    "HeldCall",
    "Hold",
    "HoldLimitReached",
    "HoldObserver",
    "HoldRegistry",
    "Pending",
    "Recorded",
    "RefusedHold",
]

JsonObj = dict[str, Any]


@dataclass(slots=True)
class Pending:
    """One backend server request waiting for the client's answer."""

    backend_id: str | int
    method: str
    request: JsonObj  # the inputRequests entry as sent to the client
    elicitation_id: str | None = None


class HeldCall(Protocol):
    """What a hold keeps for the call layer between rounds (its lease, exchange, capabilities…).

    The registry never looks inside; expiry hands the whole hold to ``on_expire``, which knows the
    concrete type (:class:`gateway.calls.context.CallContext`). A url-mode hold has no exchange running:
    it waits for the client's consent before the call is sent again."""

    @property
    def reissue(self) -> bool:
        """A url-mode hold: the call is sent again after the client's consent."""
        ...


C = TypeVar("C", bound=HeldCall)


class Recorded(Protocol):
    """One question of the call as a replay would meet it again (:class:`gateway.calls.transcript.Step`)."""

    key: str
    group: int
    answer: JsonObj | None

    def to_wire(self) -> JsonObj:
        """The question as a requestState seals it."""
        ...


@dataclass(eq=False, slots=True)
class Hold(Generic[C]):
    id: str
    route: str
    principal: str | None
    method: str
    target: str
    args_digest: str
    deadline: float
    context: C
    pending: dict[str, Pending] = field(default_factory=dict)
    round: int = 0
    """Round of the currently outstanding requestState (0 until the first is sealed)."""
    counter: int = 0
    busy: bool = False
    log: list[Recorded] = field(default_factory=list)
    """Every server request of the call in arrival order, with its answer once given: sealed into
    the state of routes that may replay a lost hold (:mod:`gateway.calls.transcript`)."""
    not_after: float = math.inf
    """Absolute deadline of the whole call (monotonic seconds): no retry re-arms the TTL past it."""
    max_rounds: int = 0
    """Most rounds the call may open, every retry's included (0: no limit)."""
    asked_at: float = field(default_factory=time.monotonic)
    """When the current round went to the client (monotonic): the hold's age at the retry."""

    def next_key(self, prefix_fn: Callable[[str, int], str], method: str) -> str:
        self.counter += 1
        return prefix_fn(method, self.counter)

    def next_group(self) -> int:
        """The round group of the questions asked next (one past every recorded one)."""
        return max((step.group for step in self.log), default=0) + 1

    def ask(self, key: str, question: Pending, record: Recorded | None = None) -> None:
        """Put ``question`` to the client under ``key`` in the round being opened; ``record`` it for a
        replay when given."""
        self.pending[key] = question
        if record is not None:
            self.log.append(record)

    def take_answer(self, key: str, answer: JsonObj) -> Pending:
        """The client answered ``key``: the question leaves the round, its answer is recorded."""
        question = self.pending.pop(key)
        for step in self.log:
            if step.key == key:
                step.answer = answer
        return question

    def next_round(self, deadline: float) -> None:
        """Open the next round: the old round's state stops being current; its TTL runs to ``deadline``."""
        self.round += 1
        self.asked_at = time.monotonic()
        self.deadline = deadline


class HoldObserver(Protocol):
    """Told when a retry resumes a hold and when a hold ends (the metrics' hold age and rounds)."""

    def resumed(self, hold: Hold[Any], waited: float) -> None: ...

    def ended(self, hold: Hold[Any]) -> None: ...


class RefusedHold(Exception):
    """The hold cannot serve this retry; ``reason`` goes to the log, never to the client."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class HoldRegistry(Generic[C]):
    def __init__(
        self,
        *,
        max_holds: int,
        max_per_principal: int,
        max_anonymous: int | None = None,
        retry_after: int,
        on_expire: Callable[[Hold[C]], Awaitable[None]],
        on_change: Callable[[int], None] | None = None,
        observer: HoldObserver | None = None,
    ) -> None:
        self._holds: dict[str, Hold[C]] = {}
        self._per_principal: Counter[str] = Counter()
        self._max = max_holds
        self._max_per_principal = max_per_principal
        # Callers without a principal all count under one key, so theirs is one shared budget.
        self._max_anonymous = max_per_principal if max_anonymous is None else max_anonymous
        self._retry_after = retry_after
        self._on_expire = on_expire
        self._on_change = on_change
        self._observer = observer
        self._expiring = TaskGroup("hold-expiry")
        """Expiries answering their backends in the background: ended by :meth:`close`."""

    def __len__(self) -> int:
        return len(self._holds)

    def counts_by_route(self) -> Counter[str]:
        """Held calls per route name."""
        return Counter(hold.route for hold in self._holds.values())

    def _report(self) -> None:
        if self._on_change is not None:
            self._on_change(len(self._holds))

    def admit(self, principal: str | None) -> None:
        """Refuse a new interactive call when a bound is reached (before any backend work)."""
        if len(self._holds) >= self._max:
            raise Overloaded("hold_limit", self._retry_after)
        if principal is None:
            if self._per_principal["-"] >= self._max_anonymous:
                raise Overloaded("anonymous_hold_limit", self._retry_after)
        elif self._per_principal[principal] >= self._max_per_principal:
            raise Overloaded("principal_hold_limit", self._retry_after)

    def new_id(self) -> str:
        return secrets.token_urlsafe(12)

    def add(self, hold: Hold[C]) -> None:
        self.admit(hold.principal)
        self._holds[hold.id] = hold
        self._per_principal[hold.principal or "-"] += 1
        self._report()

    def take(self, hold_id: str, round_: int) -> Hold[C]:
        """Claim a hold for one retry; refuse when absent, busy, or the round is not current."""
        hold = self._holds.get(hold_id)
        if hold is None:
            raise RefusedHold("hold_unknown")
        if hold.busy:
            raise RefusedHold("hold_busy")
        if round_ != hold.round:
            raise RefusedHold("round_replayed" if round_ < hold.round else "round_unknown")
        if hold.deadline <= time.monotonic():
            raise RefusedHold("hold_expired")
        hold.busy = True
        if self._observer is not None:
            self._observer.resumed(hold, time.monotonic() - hold.asked_at)
        return hold

    def serves(self, hold_id: str, round_: int) -> bool:
        """Whether a retry of ``round_`` could still take the hold: it is kept, at that round, unclaimed."""
        hold = self._holds.get(hold_id)
        return hold is not None and hold.round == round_ and not hold.busy

    def put_back(self, hold: Hold[C], *, next_round: bool, deadline: float) -> None:
        """Return a claimed hold for its next retry; ``next_round`` invalidates the old state.

        The TTL ``deadline`` is capped by the call's absolute deadline. A hold that would open a
        round past ``max_rounds``, or whose absolute deadline has passed, is ended instead (the
        backend is answered as on expiry) and :class:`HoldLimitReached` is raised.
        """
        if next_round and hold.max_rounds and hold.round >= hold.max_rounds:
            self._end(hold)
            raise HoldLimitReached("max_rounds", f"The call took more than {hold.max_rounds} input rounds")
        if hold.not_after <= time.monotonic():
            self._end(hold)
            raise HoldLimitReached("call_deadline", "The call ran past its deadline for input")
        if next_round:
            hold.next_round(min(deadline, hold.not_after))
        else:
            hold.deadline = min(deadline, hold.not_after)
        hold.busy = False

    def _end(self, hold: Hold[C]) -> None:
        self.remove(hold)
        self._expiring.spawn(self._expire(hold), name="hold-expire")

    async def _expire(self, hold: Hold[C]) -> None:
        await self._on_expire(hold)

    def release_claim(self, hold: Hold[C]) -> None:
        """A claimed hold whose retry failed before any backend effect: same round stays valid."""
        hold.busy = False

    def remove(self, hold: Hold[C]) -> None:
        if self._holds.pop(hold.id, None) is not None:
            key = hold.principal or "-"
            self._per_principal[key] -= 1
            if self._per_principal[key] <= 0:
                del self._per_principal[key]
            if self._observer is not None:
                self._observer.ended(hold)
            self._report()

    def expired(self, now: float | None = None) -> list[Hold[C]]:
        now = time.monotonic() if now is None else now
        return [h for h in self._holds.values() if h.deadline <= now and not h.busy]

    def reap(self, now: float | None = None) -> int:
        """Remove expired holds and hand each to ``on_expire`` (in the background)."""
        doomed = self.expired(now)
        for hold in doomed:
            self._end(hold)
        return len(doomed)

    async def close(self) -> None:
        """Expire every hold now (shutdown), wait for the backends to be answered, and end the group."""
        for hold in list(self._holds.values()):
            self._end(hold)
        await self._expiring.wait()
        await self._expiring.aclose()
