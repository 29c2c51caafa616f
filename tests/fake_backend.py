"""The tests' legacy backend: the demo server's wire handling, plus what only tests need.

The demo backend (:mod:`gateway.demo.backend`) is the honest handshake-era server a newcomer
puts behind the gateway; its legacy transport is shared, not copied. :class:`FakeBackend`
adds, on top of it, the behaviours the gateway's tests lean on and a newcomer never does:

* fault injections, plain attributes a test flips while the server runs: ``fail_status``
  (every POST answers that status), ``garbage`` (a 200 whose body is not JSON), ``hang``
  (POSTs never answer until shutdown), ``require_host`` (DNS-rebinding protection as the SDK
  does it: a bad Host is 421, a bad Origin 403), ``expire_sessions_after_requests`` (the
  session ends, 404, once it has served that many requests), ``page_size`` (``tools/list``
  in pages behind an opaque cursor);
* counters for assertions: ``initialize_count``, ``deleted_sessions``, ``cancelled``,
  ``received_responses``, ``received_requests`` (each request's method, params and HTTP
  headers), ``last_headers``;
* tools only tests call (:data:`TEST_TOOLS`): ``slow``, ``count``, ``progress_then_ask``,
  ``weather``, ``ping_me``, ``whoami``, ``url_login``, and for tasks ``slow_progress``,
  ``slow_then_ask``, ``ask_then_slow``, ``rpc_error``, next to the demo's own.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import uuid
from collections.abc import Mapping
from typing import Any, Final

from aiohttp import hdrs, web
from mcp_types.jsonrpc import INVALID_PARAMS, URL_ELICITATION_REQUIRED

from gateway.demo import tools as demo_tools
from gateway.demo.backend import (
    SERVER_NAME,
    SERVER_VERSION,
    SESSION_HEADER,
    DemoBackend,
    DemoSession,
    RequestId,
    _CallContext,
    _http_error,
)
from gateway.demo.tools import (
    URL_ELICITATION_PROTOCOL_VERSION,
    JsonObject,
    RpcError,
    Tool,
    ToolContext,
    ToolFailure,
    _accepted,
    _declined,
    _form,
    _number,
    _schema,
    _string,
)

__all__ = [  # SERVER_NAME and SERVER_VERSION: the fake's serverInfo is the demo's
    "FAKE_BACKEND_KEY",
    "SERVER_NAME",
    "SERVER_VERSION",
    "TEST_TOOLS",
    "TOOLS",
    "FakeBackend",
    "list_tools",
    "start_fake_backend",
]

# --- tools only tests call ---------------------------------------------------------------------


async def _slow(ctx: ToolContext, arguments: JsonObject) -> str:
    seconds = _number(arguments, "seconds")
    if seconds < 0:
        raise ToolFailure("invalid arguments: 'seconds' must not be negative")
    await asyncio.sleep(seconds)  # the tool's behaviour: a call that takes this long
    return "slept"


def _progress(ctx: ToolContext, progress: int, total: int) -> None:
    if ctx.progress_token is not None:
        notice = {"progressToken": ctx.progress_token, "progress": progress, "total": total}
        ctx.notify("notifications/progress", notice)


async def _count(ctx: ToolContext, arguments: JsonObject) -> str:
    n = _number(arguments, "n")
    if not isinstance(n, int) or not 0 <= n <= 1000:
        raise ToolFailure("invalid arguments: 'n' must be an integer between 0 and 1000")
    for i in range(1, n + 1):
        _progress(ctx, i, n)
        ctx.log("info", f"count {i}/{n}")
    return f"counted={n}"


async def _progress_then_ask(ctx: ToolContext, arguments: JsonObject) -> str:
    """Progress before and after an elicitation: the second half travels on the client's retry."""
    _progress(ctx, 1, 2)
    (answer,) = await ctx.request_all([_form(ctx, "Which city?", "city")])
    _progress(ctx, 2, 2)
    city = _accepted(answer, "city")
    return _declined(answer) if city is None else f"city={city}"


async def _slow_progress(ctx: ToolContext, arguments: JsonObject) -> str:
    """Progress with a message, then a long silence: a task's statusMessage while it works."""
    if ctx.progress_token is not None:
        ctx.notify("notifications/progress", {"progressToken": ctx.progress_token, "progress": 1, "message": "warming"})
    await asyncio.sleep(_number(arguments, "seconds"))  # the tool's behaviour: silence this long
    return "warmed"


async def _slow_then_ask(ctx: ToolContext, arguments: JsonObject) -> str:
    """Silence, then one question: a question asked inside a task."""
    await asyncio.sleep(_number(arguments, "seconds"))  # the tool's behaviour: silence before asking
    (answer,) = await ctx.request_all([_form(ctx, "Which city?", "city")])
    city = _accepted(answer, "city")
    return _declined(answer) if city is None else f"city={city}"


async def _ask_then_slow(ctx: ToolContext, arguments: JsonObject) -> str:
    """One question, then silence: an input round first, then long work."""
    (answer,) = await ctx.request_all([_form(ctx, "Which city?", "city")])
    await asyncio.sleep(_number(arguments, "seconds"))  # the tool's behaviour: silence after the answer
    city = _accepted(answer, "city")
    return _declined(answer) if city is None else f"city={city}"


async def _rpc_error(ctx: ToolContext, arguments: JsonObject) -> str:
    await asyncio.sleep(_number(arguments, "seconds"))  # the tool's behaviour: fail after a while
    raise RpcError(-32603, "rpc_error: simulated internal failure")


async def _weather(ctx: ToolContext, arguments: JsonObject) -> str:
    return f"weather in {_string(arguments, 'region')} for {_number(arguments, 'days')} days"


async def _ping_me(ctx: ToolContext, arguments: JsonObject) -> str:
    await ctx.request_all([("ping", None)])
    return "pong"


async def _whoami(ctx: ToolContext, arguments: JsonObject) -> str:
    return ctx.authorization or "none"


async def _url_login(ctx: ToolContext, arguments: JsonObject) -> str:
    if ctx.protocol_version != URL_ELICITATION_PROTOCOL_VERSION:
        raise ToolFailure(f"url_login needs protocol {URL_ELICITATION_PROTOCOL_VERSION}")
    if "url_login" in ctx.session_flags:
        return "logged-in"
    ctx.session_flags.add("url_login")
    elicitation_id = str(uuid.uuid4())
    login = f"https://example.invalid/login?elicitation={elicitation_id}"
    elicitation = {"mode": "url", "elicitationId": elicitation_id, "url": login, "message": "Sign in"}
    raise RpcError(URL_ELICITATION_REQUIRED, "URL elicitation required", {"elicitations": [elicitation]})


_WEATHER_SCHEMA = _schema(
    {"region": {"type": "string", "x-mcp-header": "Region"}, "days": {"type": "integer", "x-mcp-header": "Days"}}
)
TEST_TOOLS: Final[dict[str, Tool]] = {
    tool.name: tool
    for tool in (
        Tool("slow", "Sleep for a while.", _schema({"seconds": {"type": "number"}}), _slow),
        Tool("count", "Report progress n times.", _schema({"n": {"type": "integer"}}), _count),
        Tool(
            "slow_progress",
            "Report progress once, then stay silent.",
            _schema({"seconds": {"type": "number"}}),
            _slow_progress,
        ),
        Tool(
            "slow_then_ask",
            "Stay silent, then ask for a city.",
            _schema({"seconds": {"type": "number"}}),
            _slow_then_ask,
        ),
        Tool(
            "ask_then_slow",
            "Ask for a city, then stay silent.",
            _schema({"seconds": {"type": "number"}}),
            _ask_then_slow,
        ),
        Tool(
            "rpc_error",
            "Answer a JSON-RPC error after a while.",
            _schema({"seconds": {"type": "number"}}),
            _rpc_error,
        ),
        Tool("ping_me", "Ping the client and wait for the answer.", _schema(), _ping_me),
        Tool("whoami", "Return the Authorization header of this call.", _schema(), _whoami),
        Tool("url_login", "Require a URL-mode sign-in once per session.", _schema(), _url_login),
        Tool(
            "progress_then_ask",
            "Report progress, ask for a city, report progress again.",
            _schema(),
            _progress_then_ask,
        ),
        Tool(
            "weather",
            "A tool whose arguments are mirrored in Mcp-Param-* headers (x-mcp-header).",
            _WEATHER_SCHEMA,
            _weather,
        ),
    )
}
TOOLS: Final[dict[str, Tool]] = {**demo_tools.TOOLS, **TEST_TOOLS}
"""Every tool the fake offers: the demo's, then the tests' own."""


# --- tools/list in pages -----------------------------------------------------------------------


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"tools:{offset}".encode()).decode()


def _offset(cursor: object) -> int:
    """The offset an opaque cursor stands for; anything else is -32602."""
    try:
        prefix, _, offset = base64.urlsafe_b64decode(str(cursor).encode()).decode().partition(":")
    except (ValueError, binascii.Error):
        prefix, offset = "", ""
    if not isinstance(cursor, str) or prefix != "tools" or not offset.isdigit():
        raise RpcError(INVALID_PARAMS, "Invalid cursor")
    return int(offset)


def list_tools(params: JsonObject, page_size: int | None) -> JsonObject:
    listed = [tool.to_json() for tool in TOOLS.values()]
    if page_size is None:
        return {"tools": listed}
    start = 0 if params.get("cursor") is None else _offset(params["cursor"])
    if not 0 <= start < len(listed):
        raise RpcError(INVALID_PARAMS, "Invalid cursor")
    page: JsonObject = {"tools": listed[start : start + page_size]}
    if start + page_size < len(listed):
        page["nextCursor"] = _cursor(start + page_size)
    return page


# --- the server --------------------------------------------------------------------------------


class FakeBackend(DemoBackend):
    """:class:`DemoBackend` with the fault injections, counters and tools of the module docstring."""

    def __init__(
        self,
        *,
        page_size: int | None = None,
        expire_sessions_after_requests: int | None = None,
        fail_status: int | None = None,
        garbage: bool = False,
        hang: bool = False,
        require_host: str | None = None,
        **opts: Any,
    ) -> None:
        super().__init__(**opts)
        if page_size is not None and page_size < 1:
            raise ValueError("page_size must be positive")
        self.page_size = page_size
        self.expire_sessions_after_requests = expire_sessions_after_requests
        self.fail_status = fail_status
        self.garbage = garbage
        self.hang = hang
        self.require_host = require_host

        self.initialize_count = 0
        self.deleted_sessions: list[str] = []
        self.cancelled: list[RequestId] = []
        self.received_responses: list[JsonObject] = []
        self.last_headers: Mapping[str, str] = {}
        self.received_requests: list[tuple[str, JsonObject, Mapping[str, str]]] = []
        self._served: dict[str, int] = {}

    def app(self) -> web.Application:
        app = super().app()
        app[FAKE_BACKEND_KEY] = self
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.last_headers = request.headers.copy()
        refusal = self._check_host(request)
        if refusal is not None:
            return refusal
        if request.method == hdrs.METH_POST:
            if self.fail_status is not None:
                return web.Response(status=self.fail_status, text="injected failure")
            if self.garbage:
                return web.Response(status=200, content_type="application/json", text="<html>not JSON at all")
            if self.hang:
                await self._closing.wait()
                return web.Response(status=503, text="shutting down")
        return await super()._handle(request)

    def _check_host(self, request: web.Request) -> web.Response | None:
        """DNS-rebinding protection as the SDK does it: bad Host → 421, bad Origin → 403."""
        expected = self.require_host
        if expected is None:
            return None
        if request.headers.get(hdrs.HOST) != expected:
            return web.Response(status=421, text="Invalid Host header")
        origin = request.headers.get(hdrs.ORIGIN)
        if origin is not None and origin not in (f"http://{expected}", f"https://{expected}"):
            return web.Response(status=403, text="Invalid Origin header")
        return None

    async def _initialize(self, request: web.Request, message: JsonObject) -> web.StreamResponse:
        self.initialize_count += 1
        return await super()._initialize(request, message)

    def _receive_response(self, session: DemoSession, message: JsonObject) -> None:
        self.received_responses.append(message)
        super()._receive_response(session, message)

    def _receive_notification(self, session: DemoSession, message: JsonObject) -> None:
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        cancelled = message.get("method") == "notifications/cancelled"
        if cancelled and isinstance(request_id, str | int) and not isinstance(request_id, bool):
            self.cancelled.append(request_id)
        super()._receive_notification(session, message)

    async def _serve_request(
        self, request: web.Request, session: DemoSession, request_id: RequestId, method: str, params: object
    ) -> web.StreamResponse:
        served = self._served[session.session_id] = self._served.get(session.session_id, 0) + 1
        limit = self.expire_sessions_after_requests
        if limit is not None and served > limit:
            self._end_session(session)
            return _http_error(404, "Not Found: Session not found")
        self.received_requests.append((method, params if isinstance(params, dict) else {}, request.headers.copy()))
        return await super()._serve_request(request, session, request_id, method, params)

    async def _dispatch(self, ctx: _CallContext, method: str, params: JsonObject) -> JsonObject:
        if method == "tools/list":
            return list_tools(params, self.page_size)
        if method == "tools/call":
            return await demo_tools.call_tool(ctx, params, TOOLS)
        return await super()._dispatch(ctx, method, params)

    def _delete(self, request: web.Request) -> web.StreamResponse:
        response = super()._delete(request)
        if response.status == 200:
            self.deleted_sessions.append(request.headers[SESSION_HEADER])
        return response


FAKE_BACKEND_KEY: Final = web.AppKey("fake_backend", FakeBackend)
"""Where :meth:`FakeBackend.app` stores the backend, e.g. ``runner.app[FAKE_BACKEND_KEY]``."""


async def start_fake_backend(**opts: Any) -> tuple[web.AppRunner, str]:
    """Serve a :class:`FakeBackend` built from ``opts`` on a free loopback port: (its runner, the MCP URL).

    The caller ends it with ``await runner.cleanup()``."""
    backend = FakeBackend(**opts)
    runner = web.AppRunner(backend.app(), shutdown_timeout=5.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}{backend.path}"
