"""How a call's backend work ends when nobody will read its answer: what the backend is told, how
long its last words are read, and whether its session may serve another call.

Every call that is given up while the backend still works on it (a client gone, a failure, a
capability the client lacks, a task cancelled or past its ttl) ends through
:class:`~gateway.calls.backend.Backend` (``release``, ``abandon``), in the background: these are the
pieces it is made of, the :class:`Ending` a caller describes its end with, the steps that end the
backend's work (:func:`end_given_up`, :func:`refuse_and_cancel`), the one reading of a cancelled
call's last messages (:func:`read_last_words`) and the one check of an abandoned call answered in
time (:func:`answered_in_time`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from mcp_types.jsonrpc import METHOD_NOT_FOUND

from gateway.calls.context import CallContext
from gateway.errors import BackendUnavailable, GatewayError
from gateway.holds.registry import Pending
from gateway.legacy.session import Exchange, FinalResponse, JsonObj, ServerRequest, expiry_answer

log = structlog.get_logger("gateway.calls")

STOP_GRACE = 1.0
"""Seconds a call whose server request was refused may take to end by itself before it is cancelled."""
CANCEL_GRACE = 5.0
"""Seconds a cancelled call's session waits for the backend's last word before it is reused."""
ABANDON_GRACE = 0.5
"""Seconds a call whose client went away may take to be answered before it is cancelled (see
:func:`end_given_up`)."""
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
    """How a call given up ends upstream (:meth:`gateway.calls.backend.Backend.release`).

    Its questions nobody will answer are answered as cancelled first; then, while the backend still
    works on it, ``first`` (a legacy task's own ``tasks/cancel``) and ``notifications/cancelled``
    with ``reason``. With ``reuse_if_ended`` the backend's last words are read
    (:func:`read_last_words`) and the session is reused only if the call ended within
    :data:`CANCEL_GRACE`; without it, the session of a call cancelled is closed."""

    reason: str
    """The ``notifications/cancelled`` reason."""
    pending: tuple[Pending, ...] = ()
    """The call's outstanding questions: answered as cancelled (:func:`~gateway.legacy.session.expiry_answer`)."""
    subject: str = "call"
    """What was cancelled, as the backend is told (``the task was cancelled``)."""
    first: Callable[[CallContext], Awaitable[None]] | None = None
    """What ends the backend's work before its cancellation; it logs its own failures and never raises."""
    reuse_if_ended: bool = False
    """The backend's last words are read after the cancellation, and the session is reused if the
    call ended in time (a task's end); without it a call still running has its session closed."""

    @property
    def cancelled(self) -> str:
        return f"The {self.subject} was cancelled"


async def end_given_up(ctx: CallContext, exchange: Exchange | None, ending: Ending, reusable: bool) -> bool:
    """End a call given up as ``ending`` says (a held call's, a task's); whether its session may
    serve another call.

    Legacy servers do not treat a dropped connection as cancellation, so an abandoned call gets
    an explicit ``notifications/cancelled`` before its session is closed. A call whose client
    went away is first given :data:`ABANDON_GRACE` seconds to be answered: most were about to
    be (a client that times out, a load generator that stops), and a call answered without
    asking anything leaves its session as clean as any finished call, so the session is kept
    (no cancellation to send, no session to close and open again). Anything else in that time
    (a server request, a failure, silence) ends it as before.
    """
    session = ctx.session
    for item in ending.pending:
        result, error = expiry_answer(item.method, ending.cancelled)
        await session.respond(item.backend_id, result=result, error=error)
    if exchange is not None and ending.first is not None and not exchange.answered:
        await ending.first(ctx)
        await read_last_words(ctx, exchange, CANCEL_GRACE, ending.subject)
    if exchange is None or (ending.reuse_if_ended and exchange.answered):
        return reusable
    if ending.reason == CLIENT_GONE and await answered_in_time(exchange, ABANDON_GRACE):
        return True
    await session.notify("notifications/cancelled", {"requestId": exchange.request_id, "reason": ending.reason})
    log.info("backend_call_cancelled", route=ctx.route.name, reason=ending.reason)
    if not ending.reuse_if_ended:
        return reusable
    return await read_last_words(ctx, exchange, CANCEL_GRACE, ending.subject)


async def refuse_and_cancel(ctx: CallContext, exchange: Exchange | None, refused: ServerRequest) -> bool:
    """Answer ``refused`` with an error and give the call ``STOP_GRACE`` seconds to end by itself
    (most tools fail at once on the refusal); if it does not, send ``notifications/cancelled`` and
    read its last messages for up to ``CANCEL_GRACE`` seconds, refusing further requests. A server
    that honours the cancellation may stay silent (the spec lets it), which is a clean end too:
    the session is kept.

    The cancellation is not sent first on purpose: a server may end its whole session when a tool
    waiting on a server request is cancelled (mcp 1.30.0 FastMCP does), and the refusal alone
    usually ends the call without that cost."""
    bound = ctx.route.config.backend.timeout
    await ctx.session.respond(refused.id, error=refusal(refused, "the client did not declare this capability"))
    if exchange is not None and not await read_last_words(ctx, exchange, min(STOP_GRACE, bound)):
        await ctx.session.notify(
            "notifications/cancelled",
            {"requestId": exchange.request_id, "reason": "the client lacks a required capability"},
        )
        log.info("backend_call_cancelled", route=ctx.route.name, reason="missing_capability")
        await read_last_words(ctx, exchange, min(CANCEL_GRACE, bound))
    return True


async def read_last_words(ctx: CallContext, exchange: Exchange, grace: float, subject: str = "call") -> bool:
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
