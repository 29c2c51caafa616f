"""The response stream of one modern request: JSON unless something must be streamed first.

A 2026-07-28 server may answer a request with ``text/event-stream``: related notifications, then
the final response as the last event. The gateway commits to SSE lazily — only when the request
opted in (``_meta.progressToken`` or ``_meta["io.modelcontextprotocol/logLevel"]``), the client
accepts SSE, and the backend actually sends something to forward. Otherwise the answer is plain
JSON with the status the error table gives, so the spec's 400/404 statuses still hold.

What is forwarded: ``notifications/progress`` with the *current* request's token (a held call's
progress resumes on the retry's stream, whose token may differ) and ``notifications/message`` at
or above the requested level. Nothing else travels on a response stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

from aiohttp import web

from gateway import envelopes
from gateway.envelopes import SSE_PING, sse_event
from gateway.event_stream import KEEPALIVE_SECONDS, open_sse
from gateway.legacy.session import ServerNotification
from gateway.owned import TaskGroup

LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def _level_rank(level: Any) -> int:
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else 0


class ResponseStream:
    def __init__(
        self,
        request: web.Request,
        *,
        progress_token: str | int | None,
        log_level: str | None,
        enabled: bool,
        keepalive: float = KEEPALIVE_SECONDS,
    ) -> None:
        self._request = request
        self._token = progress_token
        self._min_level = _level_rank(log_level) if log_level is not None else None
        self._enabled = enabled and (progress_token is not None or log_level is not None)
        self._response: web.StreamResponse | None = None
        self._keepalive_every = keepalive
        self._keepalive: TaskGroup | None = None  # made on commit: a plain JSON answer pings nothing
        self._lock_: asyncio.Lock | None = None  # made when first needed: most answers are plain JSON
        self.forwarded = 0

    @property
    def _lock(self) -> asyncio.Lock:
        if self._lock_ is None:
            self._lock_ = asyncio.Lock()
        return self._lock_

    @property
    def committed(self) -> bool:
        return self._response is not None

    def wants(self, notification: ServerNotification) -> dict[str, Any] | None:
        """The modern notification to forward for ``notification``, or None."""
        if not self._enabled:
            return None
        params = dict(notification.params)
        if notification.method == "notifications/progress" and self._token is not None:
            if "progress" not in params:
                return None
            params["progressToken"] = self._token
            return envelopes.notification("notifications/progress", params)
        if notification.method == "notifications/message" and self._min_level is not None:
            if _level_rank(params.get("level")) < self._min_level:
                return None
            return envelopes.notification("notifications/message", params)
        return None

    async def on_notification(self, notification: ServerNotification) -> None:
        message = self.wants(notification)
        if message is None:
            return
        await self._send(message)
        self.forwarded += 1

    async def _commit(self) -> web.StreamResponse:
        if self._response is None:
            response = await open_sse(self._request)
            self._response = response
            self._keepalive = TaskGroup("sse-keepalive")
            self._keepalive.spawn(self._pinger(), name="sse-keepalive")
        return self._response

    async def _send(self, message: dict[str, Any]) -> None:
        async with self._lock:
            response = await self._commit()
            await response.write(sse_event(message))

    async def _pinger(self) -> None:
        with contextlib.suppress(ConnectionError):  # the client went away: the answer's own write reports it
            while True:
                await asyncio.sleep(self._keepalive_every)
                async with self._lock:
                    if self._response is None:
                        return
                    await self._response.write(SSE_PING)

    async def finish(self, message: bytes) -> web.StreamResponse:
        """Write the final JSON-RPC response as the stream's last event and end it."""
        assert self._response is not None
        await self.stop_keepalive()
        async with self._lock:
            await self._response.write(sse_event(message))
            await self._response.write_eof()
        return self._response

    async def stop_keepalive(self) -> None:
        if self._keepalive is not None:
            await self._keepalive.aclose()
            self._keepalive = None
