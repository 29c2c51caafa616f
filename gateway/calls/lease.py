"""One request's claim on a call's backend session (:class:`Lease`), and who may take it over when
the request ends before the call does (:data:`LeaseOwner`).

``async with backend.lease(call, ...) as lease`` (:meth:`gateway.calls.backend.Backend.lease`)
leases the session; leaving the block by an exception gives it up (:meth:`Lease.__aexit__`), unless
it was handed over (:meth:`Lease.hand_over`) to a hold, the hold's expiry or a task's runner.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol, TypeAlias

from gateway.calls.context import CallContext, Caller
from gateway.calls.request import Call
from gateway.calls.route import RouteRuntime
from gateway.holds.registry import Hold
from gateway.legacy.pool import PooledSession
from gateway.legacy.session import Exchange, JsonObj
from gateway.translate import capabilities as caps
from gateway.translate import results


class LeaseBackend(Protocol):
    """What a lease asks of the backend (:class:`gateway.calls.backend.Backend`)."""

    async def acquire(
        self, route: RouteRuntime, caller: Caller, normalized: JsonObj, *, exclusive: bool
    ) -> PooledSession: ...

    async def send(self, ctx: CallContext, method: str, params: JsonObj) -> Exchange: ...

    def failed(self, ctx: CallContext, exc: BaseException, *, cancel: str | None = None) -> None: ...


class Expiry:
    """The owner of a lease whose round could not open: the hold's expiry answers the backend for
    it (:meth:`gateway.calls.backend.Backend.answer_pending_for_expiry`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Expiry()"


class TaskRun(Protocol):
    """The runner of a task made of the call (:class:`gateway.mcptasks.runner.TaskRunner`, which
    ``calls`` never imports): it reads the exchange detached from the request and gives the session
    up when the task ends."""

    def cancel(self) -> None: ...


LeaseOwner: TypeAlias = Hold[CallContext] | Expiry | TaskRun
"""Who takes a lease over from the request (:meth:`Lease.hand_over`) and ends it."""


class Lease:
    """One request's claim on a call's backend session: ``async with backend.lease(call, ...) as lease``.

    Leaving the block by an exception gives the session up — discarded, the backend's work
    cancelled when the exception calls for it (:meth:`Backend.failed`) — and drops the hold the
    request had claimed (:meth:`claim`): the one place a failed call lets its session go. A lease
    handed over (:meth:`hand_over`) to what outlives the request (a hold waiting for the client's
    retry, the expiry that answers the backend for it, a task's runner) is left alone: its new owner
    ends it. A lease the call ended itself (released, finished) has nothing left to give up."""

    __slots__ = ("_backend", "_call", "_cancel", "_claimed", "_ctx", "_exclusive", "_owner", "_task_ttl")

    def __init__(
        self,
        backend: LeaseBackend,
        ctx: CallContext | None = None,
        *,
        call: Call | None = None,
        exclusive: bool = True,
        task_ttl: float | None = None,
    ) -> None:
        self._backend = backend
        self._call = call
        self._exclusive = exclusive
        self._task_ttl = task_ttl
        self._claimed: Callable[[], None] | None = None
        self._ctx = ctx
        self._owner: LeaseOwner | None = None
        self._cancel: str | None = None

    @property
    def ctx(self) -> CallContext:
        assert self._ctx is not None, "the lease has no session before it is acquired"
        return self._ctx

    @property
    def owner(self) -> LeaseOwner | None:
        """Who took the session over (:meth:`hand_over`); None while it is this request's."""
        return self._owner

    async def acquire(self) -> CallContext:
        """Lease the session (once; ``async with`` does it when nobody did before). A call that may
        become a task (``task_ttl``) asks the backend for progress and waits for its answer up to
        its task's ttl, not ``backend.timeout``, from the start."""
        if self._ctx is None:
            call = self._call
            assert call is not None
            normalized = caps.normalize(call.request.client_capabilities)
            pooled = await self._backend.acquire(call.route, call.caller, normalized, exclusive=self._exclusive)
            params = results.legacy_params(call.request.params)
            self._ctx = CallContext(
                route=call.route,
                pooled=pooled,
                normalized_caps=normalized,
                headers={**call.caller.forward_headers, **call.request.trace_headers},
                backend_method=call.request.method,
                backend_params=params if self._task_ttl is None else _with_progress_token(params),
                exclusive=self._exclusive,
            )
            if self._task_ttl is not None:
                self._ctx.answer_within(self._task_ttl)
        return self._ctx

    async def __aenter__(self) -> Lease:
        await self.acquire()
        return self

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None or self._owner is not None:
            return
        if self._claimed is not None:
            self._claimed()
        self._backend.failed(self.ctx, exc, cancel=self._cancel)

    async def send(self) -> Exchange:
        """Send the call upstream (again, after a url-mode consent)."""
        ctx = self.ctx
        return await self._backend.send(ctx, ctx.backend_method, ctx.backend_params)

    def claim(self, drop: Callable[[], None]) -> None:
        """This request holds a claimed hold of the call: ``drop`` removes it if the block fails."""
        self._claimed = drop

    def cancel_on_failure(self, reason: str | None) -> None:
        """Why the backend's work is cancelled when the block fails with an exception that names no
        reason of its own (None: it is not cancelled for that)."""
        self._cancel = reason

    def hand_over(self, owner: LeaseOwner) -> None:
        """``owner`` takes the session over and ends it (a hold, the expiry answering the backend, a
        task's runner): leaving the block no longer gives it up."""
        self._owner = owner
        self._claimed = None


def _with_progress_token(backend_params: JsonObj) -> JsonObj:
    """Ask the backend for progress on a call that may become a task (a legacy server reports it only
    for a request that carries a token): a gateway-minted token when the client sent none. Its
    notifications reach no client (the response stream forwards only the client's own token); after
    the detach they become the task's ``statusMessage``."""
    meta = backend_params.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta.setdefault("progressToken", f"mrtr-task-{os.urandom(8).hex()}")
    return {**backend_params, "_meta": meta}
