"""Transport-neutral view of one handshake-era backend session.

A :class:`BackendSession` is what the rest of the gateway sees: open it (``initialize``), start
calls that yield an :class:`Exchange`, answer the server's requests, close it. The streamable-HTTP
implementation lives in :mod:`gateway.legacy.streamable_http`; HTTP+SSE and stdio backends
implement the same protocol, so pools, holds and translation never see HTTP.

An :class:`Exchange` is one client→server request in flight. Everything the backend sends that
belongs to it — server requests, notifications, and finally the response — is pushed into its
queue, whichever backend stream it arrived on. While a session is leased to an interactive call,
server requests arriving on the session's standalone stream are attributed to the leased call:
the lease makes that attribution certain rather than a guess.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.errors import BackendUnavailable

JsonObj = dict[str, Any]


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


@dataclass(eq=False)
class Exchange:
    """One request in flight on a backend session."""

    request_id: str | int
    method: str
    queue: asyncio.Queue[ExchangeEvent | BackendUnavailable] = field(default_factory=asyncio.Queue)
    reader: asyncio.Task[None] | None = None
    done: bool = False
    answered: bool = False
    """The final response (or a failure) has been pushed; the reader may stop."""

    def push(self, event: ExchangeEvent | BackendUnavailable) -> None:
        if not self.done and not self.answered:
            self.queue.put_nowait(event)
            if isinstance(event, FinalResponse | BackendUnavailable):
                self.answered = True

    async def next(self, timeout: float) -> ExchangeEvent:
        """The next event; raises :class:`BackendUnavailable` on failure or silence past ``timeout``."""
        try:
            async with asyncio.timeout(timeout):
                item = await self.queue.get()
        except TimeoutError:
            raise BackendUnavailable("timeout", f"no answer from the backend within {timeout:g}s") from None
        return self._take(item)

    async def poll(self, window: float) -> ExchangeEvent | None:
        """The next event if one arrives within ``window`` seconds, else None (batching)."""
        try:
            async with asyncio.timeout(window):
                item = await self.queue.get()
        except TimeoutError:
            return None
        return self._take(item)

    def _take(self, item: ExchangeEvent | BackendUnavailable) -> ExchangeEvent:
        if isinstance(item, BackendUnavailable):
            self.done = True
            raise item
        if isinstance(item, FinalResponse):
            self.done = True
        return item

    def close_nowait(self) -> None:
        """Stop the reader without waiting (it releases its HTTP response as it unwinds)."""
        self.done = True
        if self.reader is not None and not self.reader.done():
            self.reader.cancel()

    async def aclose(self) -> None:
        self.done = True
        if self.reader is not None and not self.reader.done():
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.reader


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

    async def start(self, method: str, params: JsonObj, headers: dict[str, str]) -> Exchange:
        """Send a request; raises :class:`SessionExpired` or :class:`BackendUnavailable`."""
        ...

    async def respond(
        self, request_id: str | int, *, result: JsonObj | None = None, error: JsonObj | None = None
    ) -> None: ...

    async def notify(self, method: str, params: JsonObj | None = None) -> None: ...

    def attach(self, exchange: Exchange | None) -> None:
        """Attribute server requests from the standalone stream to ``exchange`` (the lease holder)."""
        ...

    async def close(self) -> None: ...
