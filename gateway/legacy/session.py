"""Transport-neutral view of one handshake-era backend session.

A :class:`BackendSession` is what the rest of the gateway sees: open it (``initialize``), start
calls that yield an :class:`Exchange`, answer the server's requests, close it. The streamable-HTTP
implementation lives in :mod:`gateway.legacy.streamable_http`; HTTP+SSE and stdio backends
implement the same protocol, so pools, holds and translation never see HTTP.

An :class:`Exchange` is one client→server request in flight. Everything the backend sends that
belongs to it — server requests, notifications, and finally the response — is pushed into its
queue, whichever backend stream it arrived on. While a session is leased to an interactive call,
server requests arriving on the session's standalone stream are attributed to the leased call:
the lease makes that attribution certain rather than a guess. The lease holder's exchange is attached
*before* its request leaves (``start(..., owner=True)``): servers may send requests on the
standalone stream before the call's own response headers arrive.

An exchange is a queue and a deadline: :meth:`Exchange.next` waits for the next event until its
timeout, :meth:`Exchange.poll` gathers a round within its window. It reads nothing itself. What
fills the queue is a reader task of the session (its standalone stream, its one demultiplexed
stream, or the SSE answer of the exchange's own POST, :attr:`Exchange.reader`), owned by the
session's task group: the session ends its readers when it closes, the exchange stops its own
answer reader when its call is done with it. A reader ends with its answer (the rest of the stream is
not read: :func:`~gateway.legacy.wire.release_at_end`). A plain pass-through call has its answer
reader too. Reading the answer in the waiting task instead saves that task's two turns of the event
loop, but then a server request arriving on the standalone stream has to interrupt the read, which
takes a cancellation of the waiting task. Measured with an uninterruptible inline read (5 B
``tools/call`` at c=1 through a FastMCP backend, 1,000 calls per path interleaved on a shared 2-core
machine): gateway minus direct 2.74 ms with or without it, CPU 2.82 instead of 2.90 ms a call - not
worth that cancellation, so no call is read without a reader.

A server request that arrives while no call owns the session (typically ``roots/list`` right after
``notifications/initialized``, which many servers ask once and cache) is *unclaimed*: the session
answers it itself when it was told how (``self_answers``, e.g. a route's static roots), else keeps it
(bounded, ``MAX_UNCLAIMED``) until the next interactive call takes it with
:meth:`BackendSession.take_unclaimed` or the pool expires it with :func:`expiry_answer`; but while a
request that cannot carry it to a client (a list) has waited :data:`UNCLAIMED_STALL` seconds for its
answer, the session answers it itself (:func:`unheard_answer`): the server may be waiting for it
before it answers the list. One attributed to a call that ends without reading it is answered by the
session (:meth:`Exchange.unanswered`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcp_types.jsonrpc import INTERNAL_ERROR

from gateway.errors import BackendUnavailable
from gateway.legacy.events import EventQueue
from gateway.owned import TaskGroup

JsonObj = dict[str, Any]

CLAIMABLE_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
"""Server requests a later call's client can answer; anything else unowned is refused at once."""
MAX_UNCLAIMED = 8
"""Unowned server requests kept per session; past it the backend is refused (bounded memory)."""
UNCLAIMED_STALL = 2.0
"""Seconds a request that cannot carry a server request to a client (a list) may wait for its answer
while the session keeps unclaimed requests; then the session answers them itself (``unheard_answer``;
see :meth:`gateway.legacy.base.LegacySessionBase._unblock`). A list is answered in milliseconds
unless the server waits for something."""
ROUND_QUIET = 0.001
"""Seconds of backend silence that complete a round once a backend has failed its round's ``ping``
(see :meth:`Exchange.poll`; bounded by the route's ``batch_window``)."""
RECEIVED_TURNS = 4
"""Turns of the event loop that read what the backend has already sent before a round is complete
(see :meth:`Exchange._received`): one turn runs the socket's read callback, the next the reader
task that parses it and queues the message; two more for a message split across two reads."""


@dataclass(frozen=True, slots=True)
class ServerRequest:
    """A JSON-RPC request the backend sent to us (elicitation/create, sampling/createMessage, roots/list…)."""

    id: str | int
    method: str
    params: JsonObj


@dataclass(frozen=True, slots=True)
class ServerNotification:
    method: str
    params: JsonObj


@dataclass(frozen=True, slots=True)
class FinalResponse:
    """The backend's JSON-RPC response to the exchange's request: exactly one of result / error."""

    result: JsonObj | None = None
    error: JsonObj | None = None


ExchangeEvent = ServerRequest | ServerNotification | FinalResponse


@dataclass(eq=False, slots=True)
class Exchange:
    """One request in flight on a backend session: the queue its events arrive in, read with a
    deadline (:meth:`next`) or a round's window (:meth:`poll`)."""

    request_id: str | int
    method: str
    queue: EventQueue[ExchangeEvent | BackendUnavailable] = field(default_factory=EventQueue)
    reader: asyncio.Task[None] | None = None
    """The session's task that reads this exchange's own answer stream, if it has one (it ends with
    the answer); stopped by :meth:`close_nowait` / :meth:`aclose`. A reader that has read the answer
    sets this back to None: what is left of its chunk is routed whatever the call does next."""
    done: bool = False
    """The call is done with the exchange: it has its answer or a failure, or was closed."""
    answered: bool = False
    """The final response (or a failure) has been pushed; the reader may stop."""
    receiving: Callable[[], bool] | None = None
    """Set by a transport that can tell: part of a message has arrived, the rest has not yet."""
    fence_ping: Callable[[], Awaitable[None]] | None = None
    """A round trip through the backend (``ping``) that returns after what it had sent before."""
    on_answer: Callable[[float], None] | None = None
    """Told the backend's answer time when the answer is read (:meth:`backend_turn`)."""
    on_unread: Callable[[ServerRequest], None] | None = None
    """Told each server request no reader will answer (:meth:`unanswered`); the session answers it."""
    _turn_since: float | None = field(default_factory=time.monotonic)
    _answer_time: float | None = None
    fence_group: TaskGroup | None = None
    """The group that runs a round's ``fence_ping`` while it is out (see :meth:`poll`): the session's,
    as for every task that reads or writes on it. Rounds are fenced only with both ``fence_ping`` and this."""
    _fence: asyncio.Task[None] | None = None
    _fence_answered: bool = False
    _unfenced: bool = False
    """A ``fence_ping`` failed: this exchange gathers rounds by silence alone (see :meth:`poll`)."""

    def backend_turn(self) -> bool:
        """The gateway is sending the backend what it waited for (the client's answers): time the
        backend's next answer from now. Returns whether a server request is already queued: the
        backend sent it before it could see these answers, so it asked it together with the round
        being answered (a round :meth:`poll` closed before it arrived)."""
        self._turn_since, self._answer_time = time.monotonic(), None
        return self.queue.holds(ServerRequest)

    def push(self, event: ExchangeEvent | BackendUnavailable) -> None:
        if isinstance(event, ServerRequest) and (self.done or self.answered):
            self.unanswered(event)  # its call has its answer: nobody will read this one
            return
        if not self.done and not self.answered:
            if self._turn_since is not None and isinstance(event, ServerRequest | FinalResponse):
                # Stamped on arrival, reported when read: the gateway's own delays stay out of it.
                self._answer_time, self._turn_since = time.monotonic() - self._turn_since, None
            self.queue.put_nowait(event)
            if isinstance(event, FinalResponse | BackendUnavailable):
                self.answered = True

    async def next(self, timeout: float) -> ExchangeEvent:
        """The next event; raises :class:`BackendUnavailable` on failure or silence past ``timeout``."""
        if not self.queue.empty():
            return self._take(self.queue.get_nowait())
        item = await self.queue.get_until(asyncio.get_running_loop().time() + timeout)
        if item is None:
            raise BackendUnavailable("timeout", f"no answer from the backend within {timeout:g}s")
        return self._take(item)

    async def next_or_none(self, timeout: float) -> ExchangeEvent | None:
        """The next event, or None after ``timeout`` seconds of silence (a failure still raises): a
        wait whose end is the caller's decision, not the backend's failure (a task's threshold or ttl)."""
        if not self.queue.empty():
            return self._take(self.queue.get_nowait())
        item = await self.queue.get_until(asyncio.get_running_loop().time() + max(timeout, 0.0))
        return None if item is None else self._take(item)

    async def poll(self, window: float, *, fenced: bool = True) -> ExchangeEvent | None:
        """The next event of the round being gathered, or None once the round is complete.

        Unfenced (``fenced`` False, or no ``fence_ping``): the round is what the bytes already
        received from the backend complete (:meth:`_received`): a few turns of the loop, no timer.
        A request the backend writes after that is not lost: it is the next round. The call core
        decides which rounds are fenced (:class:`gateway.calls.route.RoundFences`: a tool's, until
        it has shown it asks one question at a time).

        Fenced: a server sends the requests of one round together (``asyncio.gather`` of an
        elicitation and a sampling: two writes a few task switches apart). The round's fence is one
        ``ping`` (``fence_ping``), sent as soon as the round is being gathered: a server writes
        every message of a session through one ordered stream, and answers the ping only after it
        has run what it had ready, so whatever it sent before the ping comes back arrives before its
        answer, even if its process was descheduled between two writes. Once the ping is answered,
        what arrived with it is read (:meth:`_received`) and the round is complete. Events that
        arrive while the ping is out are returned at once, and the same ping fences them.
        ``window`` (the route's ``batch_window``) bounds the whole wait: a request that comes later
        than that is still handled correctly, as the next round; 0 ends every round at once.

        A backend that fails to answer the ping gives no such evidence: from then on this exchange
        gathers as a quiet backend must be waited for - :data:`ROUND_QUIET` of silence, a ping
        whatever its outcome (its round trip still takes as long as the backend is slow), and
        :data:`ROUND_QUIET` again.
        """
        if not self.queue.empty():
            return self._take(self.queue.get_nowait())
        if window <= 0:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + window
        item: ExchangeEvent | BackendUnavailable | None = None
        if not fenced or self.fence_ping is None or self.fence_group is None:
            item = await self._received(deadline)
        elif self._unfenced:
            item = await self._quiet_ping_quiet(deadline)
        else:
            if self._fence is None:
                self._fence_answered = False
                self._fence = self.fence_group.spawn(self._fenced(self.fence_ping), name="legacy-round-fence")
            item = await self.queue.get_until(deadline, unless=self._fence)
            if item is None:
                if self._end_fence():
                    item = await self._received(deadline)
                elif loop.time() < deadline:
                    self._unfenced = True
                    item = await self._quiet_ping_quiet(deadline)
        if item is None:
            return None
        if isinstance(item, FinalResponse | BackendUnavailable):
            self._end_fence()
        return self._take(item)

    async def _received(self, deadline: float) -> ExchangeEvent | BackendUnavailable | None:
        """What the bytes already received complete: :data:`RECEIVED_TURNS` turns of the loop, each
        reading the sockets that are ready, then the end of a message half received (``receiving``),
        bounded by ``deadline``. No timer: a selector waits at least 1 ms for one."""
        for _ in range(RECEIVED_TURNS):
            await asyncio.sleep(0)
            if not self.queue.empty():
                return self.queue.get_nowait()
        if self.receiving is not None and self.receiving():
            return await self.queue.get_until(deadline)
        return None

    async def _quiet(self, deadline: float) -> ExchangeEvent | BackendUnavailable | None:
        """:data:`ROUND_QUIET` of silence, or the end of a half-received message."""
        loop = asyncio.get_running_loop()
        item = await self.queue.get_until(min(deadline, loop.time() + ROUND_QUIET))
        if item is None and self.receiving is not None and self.receiving():
            item = await self.queue.get_until(deadline)
        return item

    async def _quiet_ping_quiet(self, deadline: float) -> ExchangeEvent | BackendUnavailable | None:
        """Gathering after a failed fence (see :meth:`poll`)."""
        loop = asyncio.get_running_loop()
        item = await self._quiet(deadline)
        if item is None and self.fence_ping is not None and loop.time() < deadline:
            try:
                async with asyncio.timeout_at(deadline):
                    await self.fence_ping()
            except (TimeoutError, BackendUnavailable, SessionExpired):
                pass  # bounded by the window, and the window alone decides then
            item = await self.queue.get_until(min(deadline, loop.time() + ROUND_QUIET))
        return item

    async def _fenced(self, fence_ping: Callable[[], Awaitable[None]]) -> None:
        try:
            await fence_ping()
        except Exception:  # a ping that fails or times out is an outcome: the round goes on by silence
            return
        self._fence_answered = True

    def _end_fence(self) -> bool:
        """The round is over: the next one sends its own ping. A ping still out is cancelled.
        Returns whether the ping was answered."""
        fence, self._fence = self._fence, None
        if fence is None:
            return False
        if not fence.done():
            fence.cancel()
            return False
        return self._fence_answered

    def _take(self, item: ExchangeEvent | BackendUnavailable) -> ExchangeEvent:
        if isinstance(item, BackendUnavailable):
            self.done = True
            raise item
        if isinstance(item, FinalResponse):
            self.done = True
        answer_time = self._answer_time
        if answer_time is not None and self.on_answer is not None and isinstance(item, ServerRequest | FinalResponse):
            self.on_answer(answer_time)
            self._answer_time = None
        return item

    def unanswered(self, request: ServerRequest) -> None:
        """``request`` belongs to this exchange, whose call will not answer it: pushed after the answer
        or the close, still queued at the close, or given back by a reader that stops (:attr:`on_unread`)."""
        if self.on_unread is not None:
            self.on_unread(request)

    def _give_back_unread(self) -> None:
        """The exchange is closed: the server requests still queued will never be read."""
        while not self.queue.empty():
            item = self.queue.get_nowait()
            if isinstance(item, ServerRequest):
                self.unanswered(item)

    def close_nowait(self) -> None:
        """Stop the reader without waiting (it releases its HTTP response as it unwinds)."""
        self.done = True
        self._give_back_unread()
        self._end_fence()
        if self.reader is not None and not self.reader.done():
            self.reader.cancel()

    async def aclose(self) -> None:
        self.close_nowait()
        if self.reader is not None and not self.reader.done():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.reader


@dataclass(frozen=True, slots=True)
class Unclaimed:
    """A server request no call owned when it arrived, and when it arrived (``time.monotonic()``)."""

    request: ServerRequest
    since: float


def expiry_answer(
    method: str, message: str = "The client did not answer in time"
) -> tuple[JsonObj | None, JsonObj | None]:
    """``(result, error)`` the gateway answers a server request nobody will answer (hold-expiry rules):
    an elicitation is cancelled (never a made-up decline), anything else gets a JSON-RPC error."""
    if method == "elicitation/create":
        return {"action": "cancel"}, None
    return None, {"code": INTERNAL_ERROR, "message": message}


def unheard_answer(method: str) -> tuple[JsonObj | None, JsonObj | None]:
    """``(result, error)`` for a server request no client can be asked while a request of ours waits
    behind it (a list): ``roots/list`` gets an empty list (no client shares roots with a list),
    anything else :func:`expiry_answer`'s answer."""
    if method == "roots/list":
        return {"roots": []}, None
    return expiry_answer(method, "No client request that could answer this was in flight")


class SessionExpired(Exception):
    """The backend answered 404 for our session id: it is gone and must be re-initialized."""


class BackendSession(Protocol):
    """What pools, holds and call drivers rely on."""

    @property
    def protocol_version(self) -> str: ...

    @property
    def initialize_result(self) -> JsonObj: ...

    @property
    def broken(self) -> bool: ...

    async def open(self) -> None: ...

    async def start(
        self,
        method: str,
        params: JsonObj,
        headers: dict[str, str],
        *,
        owner: bool = False,
        answer_timeout: float | None = None,
    ) -> Exchange:
        """Send a request; raises :class:`SessionExpired` or :class:`BackendUnavailable`.

        ``owner``: the exchange is the lease holder's and is attached before the request is sent.
        ``answer_timeout``: a call that may become a task (:mod:`gateway.mcptasks`) may take this long
        to answer, headers included, instead of ``backend.timeout``; such a call's ``start`` returns
        before the answer begins (a transport that waits for response headers waits in the background).
        """
        ...

    async def respond(
        self, request_id: str | int, *, result: JsonObj | None = None, error: JsonObj | None = None
    ) -> None: ...

    async def notify(self, method: str, params: JsonObj | None = None) -> None: ...

    def attach(self, exchange: Exchange | None) -> None:
        """Attribute server requests from the standalone stream to ``exchange`` (the lease holder)."""
        ...

    def take_unclaimed(self) -> list[ServerRequest]:
        """The unowned server requests kept so far, oldest first; the caller now owns them."""
        ...

    def expire_unclaimed(self, older_than: float) -> list[str]:
        """Answer the unowned requests that arrived before ``older_than`` (monotonic) as
        :func:`expiry_answer` says, in the session's task group; returns their methods."""
        ...

    async def close(self) -> None: ...
