"""Server requests no call owns, on a handshake-era session: answered from the route's own
answers, kept for the next interactive call, or refused; answered after all when a request that
cannot carry them to a client waits for them.

:class:`UnclaimedRequests` is that part of :class:`~gateway.legacy.base.LegacySessionBase`: a
server request that arrives while no interactive call holds the session goes to :meth:`_unowned`;
a kept one is taken by the next interactive call (:meth:`take_unclaimed`), answered when a list
waits for it (:meth:`_unblock`), or expired by the pool after ``holds.ttl``
(:meth:`expire_unclaimed`). The session's state it reads is set by the base's ``__init__``.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import time

import structlog
from mcp_types.jsonrpc import METHOD_NOT_FOUND

from gateway.errors import GatewayError
from gateway.legacy.session import (
    CLAIMABLE_METHODS,
    MAX_UNCLAIMED,
    Exchange,
    JsonObj,
    ServerRequest,
    SessionExpired,
    Unclaimed,
    expiry_answer,
    unheard_answer,
)
from gateway.owned import TaskGroup

log = structlog.get_logger("gateway.legacy")


class UnclaimedRequests(abc.ABC):
    """Server requests no call owns: kept, answered or refused (see the module)."""

    __slots__ = ("_stall", "_unblocking", "_unclaimed")  # see LegacySessionBase

    self_answers: dict[str, JsonObj]
    _self_answering: set[asyncio.Future[None]]
    keep_unclaimed: bool
    _unclaimed: list[Unclaimed]
    _uncarried: dict[Exchange, float]
    _unblocking: asyncio.Task[None] | None
    _stall: float
    _tasks: TaskGroup

    @abc.abstractmethod
    async def respond(
        self, request_id: str | int, *, result: JsonObj | None = None, error: JsonObj | None = None
    ) -> None:
        """Answer a server request (``result`` or ``error``)."""

    async def _unowned(self, request: ServerRequest) -> None:
        """Answer it from ``self_answers``, keep it for the next interactive call, or refuse it."""
        answer = self.self_answers.get(request.method)
        if answer is not None:
            sent = asyncio.get_running_loop().create_future()
            self._self_answering.add(sent)  # _ping_after_initialize waits for it: the server has it before a call
            try:
                await self.respond(request.id, result=answer)
            finally:
                self._self_answering.discard(sent)
                sent.set_result(None)
            return
        if self.keep_unclaimed and request.method in CLAIMABLE_METHODS and len(self._unclaimed) < MAX_UNCLAIMED:
            self._unclaimed.append(Unclaimed(request, time.monotonic()))
            log.info("server_request_unclaimed", method=request.method)
            self._watch_unclaimed()
            return
        log.info("server_request_refused", method=request.method, reason="no call in flight")
        await self.respond(
            request.id,
            error={"code": METHOD_NOT_FOUND, "message": "No client request is in flight for this server request"},
        )

    def _watch_unclaimed(self) -> None:
        if self._uncarried and (self._unblocking is None or self._unblocking.done()):
            self._unblocking = self._tasks.spawn(self._unblock(), name="legacy-unblock-unclaimed")

    async def _unblock(self) -> None:
        """Answer the unclaimed requests once a request that cannot carry them to a client has waited
        :data:`~gateway.legacy.session.UNCLAIMED_STALL` seconds for its answer.

        A server may ask something before it answers a list: ``mcp-shrimp-task-manager`` asks
        ``roots/list`` inside ``tools/list``, and serves nothing until it is answered. A list is no
        interactive call: no client can be asked through it, and keeping the request for the next
        call leaves the list waiting for its timeout. So, while such a request is unanswered for that
        long, every request kept unclaimed (and every one that arrives until it is answered) is
        answered here: from ``self_answers``, else ``roots/list`` with an empty list, an elicitation
        cancelled, anything else an error (:func:`~gateway.legacy.session.unheard_answer`), with a
        ``server_request_unblocked`` line. Without such a wait a request stays kept for the next
        interactive call (up to ``holds.ttl``): a server that asks ``roots/list`` at session start
        (server-filesystem) and answers lists at once still gets the roots of the next call's client.
        Once a list has waited so, the session knows its server: from then on a request that arrives
        while a list is in flight is answered at once (shrimp asks again in every list).
        """
        while self._unclaimed:
            waiting = [since for e, since in self._uncarried.items() if not (e.done or e.answered)]
            if not waiting:
                return
            wait = min(waiting) + self._stall - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            self._stall = 0.0
            for request in self.take_unclaimed():
                log.info("server_request_unblocked", method=request.method, reason="a list waits for it")
                await self._answer_itself(request, unheard_answer(request.method))

    def take_unclaimed(self) -> list[ServerRequest]:
        taken, self._unclaimed = self._unclaimed, []
        return [u.request for u in taken]

    def expire_unclaimed(self, older_than: float) -> list[str]:
        expired = [u.request for u in self._unclaimed if u.since < older_than]
        self._unclaimed = [u for u in self._unclaimed if u.since >= older_than]
        for request in expired:
            self._tasks.spawn(self._answer_itself(request, expiry_answer(request.method)), name="legacy-answer-expired")
        return [request.method for request in expired]

    async def _answer_itself(self, request: ServerRequest, fallback: tuple[JsonObj | None, JsonObj | None]) -> None:
        """Answer ``request`` from ``self_answers`` (a route's static roots), else with ``fallback``."""
        result: JsonObj | None = self.self_answers.get(request.method)
        error: JsonObj | None = None
        if result is None:
            result, error = fallback
        with contextlib.suppress(GatewayError, SessionExpired):
            await self.respond(request.id, result=result, error=error)
