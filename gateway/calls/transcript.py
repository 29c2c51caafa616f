"""Replay of a lost hold: what may be replayed, and the transcript that answers it.

A route with ``holds.on_lost: replay`` seals, into every round's requestState, the transcript of
the call's server requests, one :class:`Step` each, sealed as
``{"m": method, "k": key, "d": digest, "n": group, "r": answer}`` (``r`` None for the round still
waiting; :meth:`Step.to_wire`, :meth:`Step.from_wire`). When the hold is provably gone, another replica runs the
call again and answers the new run's server requests from that transcript. Three rules keep this
from doing harm:

1. **Never answer a question the user did not see.** Each recorded answer is bound to
   :func:`~gateway.state.claims.request_digest` of the request it answered. A new request is
   answered only by a recorded answer with the same digest, from the same round (order within a
   round may differ between runs). The first request that matches nothing ends the replay: it,
   and whatever follows, becomes a normal round for the client.
2. **Replay only a lost hold, once.** The decision is the call core's (it knows who the owner is and
   whether it is gone); :class:`ReplayGuard` makes sure one replica runs a given hold's replay at
   most once, remembering the hold id until no token of that call can still be valid.
3. **Keys stay stable.** A recorded question asked again keeps its key, and new questions are
   numbered after every key the call has used, so keys never change meaning within a call.

What is not here, and cannot be without shared storage: two replicas that both cannot reach the
owner's address may each replay the same token once (README, "Replicas").
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.bounded import MemoryFull, OnceMemory
from gateway.errors import InvalidParams, Overloaded
from gateway.translate import inputs

JsonObj = dict[str, Any]

DEFAULT_MEMORY = 100_000
"""Replay tokens remembered per replica (about 100 bytes each)."""


@dataclass(slots=True)
class Step:
    """One server request of a call and, once the client gave it, its answer: a hold records one per
    question it asks (:meth:`~gateway.holds.registry.Hold.ask`), and a replay meets them again."""

    method: str
    key: str
    digest: str | None  # None for a transcript sealed before digests existed: never matches
    group: int
    answer: JsonObj | None  # set when the client answers (:meth:`~gateway.holds.registry.Hold.take_answer`)

    def to_wire(self) -> JsonObj:
        """The step as it is sealed into a requestState: ``{"m", "k", "d", "n", "r"}``, in that order."""
        return {"m": self.method, "k": self.key, "d": self.digest, "n": self.group, "r": self.answer}

    @classmethod
    def from_wire(cls, entry: Any) -> Step | None:
        """A sealed step (None for an entry that is not an object); fields of the wrong type read as
        unknown: no digest (never matches), group 0, no answer."""
        if not isinstance(entry, Mapping):
            return None
        raw_digest, raw_group, raw_answer = entry.get("d"), entry.get("n"), entry.get("r")
        return cls(
            str(entry.get("m")),
            str(entry.get("k")),
            raw_digest if isinstance(raw_digest, str) else None,
            raw_group if isinstance(raw_group, int) else 0,
            raw_answer if isinstance(raw_answer, dict) else None,
        )


def _key_number(key: str) -> int:
    tail = key.rpartition("-")[2]
    return int(tail) if tail.isascii() and tail.isdigit() and len(tail) < 10 else 0


def plan(entries: Sequence[Any], responses: Mapping[str, Any]) -> list[Step]:
    """The transcript as steps; the waiting round's answers come from this retry's ``inputResponses``."""
    steps: list[Step] = []
    for entry in entries:
        step = Step.from_wire(entry)
        if step is None:
            continue
        key = step.key
        if step.answer is None and key in responses:
            step.answer = checked_answer(key, step.method, responses[key])
        steps.append(step)
    return steps


def checked_answer(key: str, method: str, response: Any) -> JsonObj:
    """The client's answer under ``key`` to a ``method`` server request, checked against the kind of
    request it answers; a malformed one raises :class:`~gateway.errors.InvalidParams` (the one check
    of a held call's, a replay's and a task's answers)."""
    try:
        return inputs.check_response(method, response)
    except inputs.MalformedInputResponse as exc:
        raise InvalidParams(f"Invalid inputResponses[{key!r}]: {exc}", reason="bad_input_response") from None


@dataclass(eq=False)
class Carry:
    """What a replayed call keeps for the hold it may create: stable keys and the call's deadline."""

    key_base: int
    """New questions are numbered after this (the highest key number the call has used)."""
    until: float | None
    """The original call's absolute deadline (unix seconds), so a replay never extends it."""
    asked: dict[str, deque[str]] = field(default_factory=dict)
    """Digest → keys of recorded questions the user has not answered yet."""

    def key_for(self, digest: str) -> str | None:
        keys = self.asked.get(digest)
        return keys.popleft() if keys else None


class Transcript:
    """The steps a replay still has to meet, matched round by round."""

    def __init__(self, steps: Sequence[Step], until: float | None) -> None:
        self._steps = list(steps)
        self.carry = Carry(
            key_base=max([len(steps), *(_key_number(s.key) for s in steps)]),
            until=until,
        )

    def __bool__(self) -> bool:
        return bool(self._steps)

    def take(self, digest: str) -> Step | None:
        """The recorded step of the current round with this digest (removed), or None."""
        if not self._steps:
            return None
        group = self._steps[0].group
        for index, step in enumerate(self._steps):
            if step.group != group:
                break
            if step.digest == digest:
                return self._steps.pop(index)
        return None

    def stop(self, first: Step | None = None) -> Carry:
        """Replay ends here; the recorded questions still unanswered keep their keys if asked again."""
        for step in [*([first] if first else []), *self._steps]:
            if step.answer is None and step.digest is not None:
                self.carry.asked.setdefault(step.digest, deque()).append(step.key)
        self._steps = []
        return self.carry


class ReplayGuard:
    """One replay per hold per replica: the hold id is remembered until the call's last token expires."""

    def __init__(self, max_entries: int = DEFAULT_MEMORY, retry_after: int = 5) -> None:
        self._memory: OnceMemory[str] = OnceMemory(max_entries)
        self._retry_after = retry_after

    def __len__(self) -> int:
        return len(self._memory)

    def consume(self, hold_id: str, until: float) -> bool:
        """True for the first replay of ``hold_id``; False when it was already replayed here.

        Full memory refuses (503): forgetting a live entry would let its token run twice.
        """
        try:
            return self._memory.first_use(hold_id, until)
        except MemoryFull:
            raise Overloaded("replay_memory_full", self._retry_after) from None

    def replayed(self, hold_id: str) -> bool:
        """Whether ``hold_id`` was replayed here (and is still remembered)."""
        return self._memory.used(hold_id)

    def release(self, hold_id: str) -> None:
        """The replay failed before the call reached the backend: the token may be used again."""
        self._memory.forget(hold_id)


def remember_until(claims_exp: int, until: object, lifetime: float) -> float:
    """How long a replayed hold id must be remembered: past the expiry of any token of its call.

    Every token of a call expires by its absolute deadline ``until`` when the token carries one;
    otherwise by ``lifetime`` seconds from now (no token of the call can be newer than now).
    """
    if isinstance(until, int | float) and not isinstance(until, bool):
        return max(float(until), float(claims_exp))
    return max(float(claims_exp), time.time() + lifetime)
