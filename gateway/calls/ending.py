"""How a call's backend work ends when nobody will read its answer: what the backend is told, how
long its last words are read, and whether its session may serve another call.

Every call that is given up while the backend still works on it (a client gone, a failure, a
capability the client lacks, a task cancelled or past its ttl) ends through
:class:`~gateway.calls.backend.Backend` (``release``, ``abandon``, ``end``), in the background:
these are the pieces it is made of, the :class:`Ending` a caller describes its end with, the one
reading of a cancelled call's last messages (:func:`settle`) and the one check of an abandoned
call answered in time (:func:`answered_in_time`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mcp_types.jsonrpc import METHOD_NOT_FOUND

from gateway.calls.context import CallContext
from gateway.errors import BackendUnavailable, GatewayError
from gateway.holds.registry import Pending
from gateway.legacy.session import Exchange, FinalResponse, JsonObj, ServerRequest

STOP_GRACE = 1.0
"""Seconds a call whose server request was refused may take to end by itself before it is cancelled."""
CANCEL_GRACE = 5.0
"""Seconds a cancelled call's session waits for the backend's last word before it is reused."""
CLIENT_GONE = "client disconnected"


def cancel_reason(exc: BaseException) -> str | None:
    """Why an unanswered backend call is being abandoned, if it should be cancelled upstream."""
    if isinstance(exc, asyncio.CancelledError):
        return CLIENT_GONE
    if isinstance(exc, BackendUnavailable) and exc.reason == "timeout":
        return "gateway timeout"
    if isinstance(exc, GatewayError):
        return None
    return "gateway error"


def refusal(event: ServerRequest, why: str) -> JsonObj:
    """The error a server request the client must not (or can no longer) see is answered with."""
    return {"code": METHOD_NOT_FOUND, "message": f"{event.method}: {why}"}


@dataclass(frozen=True, slots=True)
class Ending:
    """How a call given up ends upstream (:meth:`gateway.calls.backend.Backend.release`, ``end``).

    Its questions nobody will answer are answered as cancelled first; then, while the backend still
    works on it, ``first`` (a legacy task's own ``tasks/cancel``) and ``notifications/cancelled``
    with ``reason``. With ``settle`` the backend's last words are read (:func:`settle`) and the
    session is reused only if the call ended within :data:`CANCEL_GRACE`; without it, the session
    of a call cancelled is closed."""

    reason: str
    """The ``notifications/cancelled`` reason."""
    pending: tuple[Pending, ...] = ()
    """The call's outstanding questions: answered as cancelled (:func:`~gateway.legacy.session.expiry_answer`)."""
    subject: str = "call"
    """What was cancelled, as the backend is told (``the task was cancelled``)."""
    first: Callable[[CallContext], Awaitable[None]] | None = None
    """What ends the backend's work before its cancellation; it logs its own failures and never raises."""
    settle: bool = False

    @property
    def cancelled(self) -> str:
        return f"The {self.subject} was cancelled"


async def settle(ctx: CallContext, exchange: Exchange, grace: float, subject: str = "call") -> bool:
    """Read a cancelled call's messages for up to ``grace`` seconds (its late result discarded, its
    questions refused); True once it has ended (its final response, or its stream closed: a broken
    session says so itself and the pool then closes it), False if it is still running."""
    if exchange.answered:
        return True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    try:
        while (left := deadline - loop.time()) > 0:
            event = await exchange.next_or_none(left)
            if event is None:
                return False
            if isinstance(event, FinalResponse):
                return True
            if isinstance(event, ServerRequest):
                await ctx.session.respond(event.id, error=refusal(event, f"the {subject} was cancelled"))
    except GatewayError:
        return True
    return False


async def answered_in_time(exchange: Exchange, grace: float) -> bool:
    """The exchange's answer (a result or a JSON-RPC error) arrives within ``grace`` seconds, with
    nothing but notifications before it."""
    deadline = asyncio.get_running_loop().time() + grace
    try:
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            event = await exchange.next(left)
            if isinstance(event, FinalResponse):
                return True
            if isinstance(event, ServerRequest):
                exchange.unanswered(event)  # its client is gone
                return False
    except GatewayError:
        return False
    return False
