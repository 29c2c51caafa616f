"""A small, honest legacy MCP server on aiohttp: the demo backend.

Why it exists
-------------
``mrtr-gateway demo`` needs a handshake-era server to put behind the gateway without
bringing an MCP SDK into the runtime package. This module depends only on aiohttp, the
standard library and ``mcp_types`` constants. The test-suite's fake (``tests/fake_backend.py``)
builds on its wire handling and adds the faults, counters and tools only tests need.

What "honest" means
-------------------
It speaks streamable HTTP (revisions 2024-11-05 … 2025-11-25) the way the mcp 1.x Python
SDK server does, per ``mcp-wire-reference.md`` §6.1:

* ``initialize`` mints an ``Mcp-Session-Id``; every later request must carry it
  (missing → 400, unknown or expired → 404) and, once 2025-06-18 or later was negotiated,
  an ``MCP-Protocol-Version`` header equal to the negotiated revision (else 400; this
  server is stricter than the SDK, which assumes 2025-03-26 when the header is absent).
* Notifications and JSON-RPC responses posted by the client get ``202`` and no body.
* A request is answered on its own SSE stream, with related notifications and
  server→client requests (``elicitation/create``, ``sampling/createMessage``, ``ping``)
  before the final response. The tool then waits for the client to POST the answer.
  ``roots/list`` goes to the standalone GET stream instead, as the SDK's ``list_roots()``
  does; it is queued until a GET stream is open.
* With ``json_response=True`` a request gets one ``application/json`` answer. There is no
  stream to ask on, so tools that need input on the POST stream fail with a tool error
  result, and related notifications are dropped, like the SDK in JSON mode.
* Server→client requests are sent only if the session's client declared the capability.
* Like the SDK it insists on ``Accept`` (406) and ``Content-Type`` (415), refuses JSON-RPC
  batches (400), allows one GET stream per session (409) and answers a request cancelled
  by ``notifications/cancelled`` with nothing: the SSE stream ends, or 204 in JSON mode.

Options
-------
Options are keyword arguments of :class:`DemoBackend` and stay plain attributes: ``path``,
``versions``, ``json_response``, ``answer_timeout``, ``keepalive_interval``; ``sessions``
shows live sessions.

Shutdown
--------
1. ``on_shutdown``: set the closing event (hanging POSTs return), end every session
   (GET streams close, the session's calls are cancelled), cancel every tool task, so no
   handler is left for aiohttp to wait on.
2. ``cleanup_ctx`` exit: cancel and await whatever tool task is still owned.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from aiohttp import hdrs, web
from mcp_types.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    JSONRPC_VERSION,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from gateway.demo import tools
from gateway.demo.tools import JsonObject, RpcError, ToolFailure
from gateway.owned import TaskGroup

logger = logging.getLogger(__name__)

SERVER_NAME: Final = "mrtr-demo-backend"
SERVER_VERSION: Final = "1.0.0"
SESSION_HEADER: Final = "Mcp-Session-Id"
VERSION_HEADER: Final = "MCP-Protocol-Version"
VERSION_HEADER_SINCE: Final = "2025-06-18"
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
INSTRUCTIONS: Final = (
    "Demo backend for mrtr-gateway. Try add, ask_city (elicitation), summarize (sampling) and show_roots (roots)."
)

RequestId = str | int


def _capabilities() -> JsonObject:
    return {
        "tools": {"listChanged": True},
        "prompts": {},
        "resources": {"subscribe": False},
        "completions": {},
        "logging": {},
    }


@dataclass(eq=False)
class DemoSession:
    """One initialized session; everything a client's later requests can touch."""

    session_id: str
    protocol_version: str
    client_capabilities: JsonObject
    log_level: str = "debug"
    flags: set[str] = field(default_factory=set)
    pending: dict[int, asyncio.Future[JsonObject]] = field(default_factory=dict)
    calls: dict[RequestId, asyncio.Task[None]] = field(default_factory=dict)
    standalone: asyncio.Queue[JsonObject | None] = field(default_factory=asyncio.Queue)
    standalone_open: bool = False
    _next_request_id: int = 0

    def next_request_id(self) -> int:
        request_id = self._next_request_id
        self._next_request_id += 1
        return request_id

    def missing_capability(self, method: str) -> str | None:
        """The client capability ``method`` needs and this session's client did not declare."""
        caps = self.client_capabilities
        if method == "elicitation/create":
            elicitation = caps.get("elicitation")
            if not isinstance(elicitation, dict):
                return "elicitation"
            # 2025-11-25: {} means form; {"url": {}} alone means the client cannot show forms.
            if elicitation and "form" not in elicitation:
                return "elicitation.form"
        elif method == "sampling/createMessage" and not isinstance(caps.get("sampling"), dict):
            return "sampling"
        elif method == "roots/list" and not isinstance(caps.get("roots"), dict):
            return "roots"
        return None


@dataclass(frozen=True, slots=True)
class _Frame:
    """One message for a request's answer; ``final`` marks the JSON-RPC response."""

    message: JsonObject
    final: bool


def _rpc_message(method: str, params: JsonObject | None, request_id: RequestId | None = None) -> JsonObject:
    message: JsonObject = {"jsonrpc": JSONRPC_VERSION}
    if request_id is not None:
        message["id"] = request_id
    message["method"] = method
    if params is not None:
        message["params"] = params
    return message


class _CallContext:
    """:class:`tools.ToolContext` for one request on one session."""

    def __init__(
        self,
        backend: DemoBackend,
        session: DemoSession,
        outbox: asyncio.Queue[_Frame | None],
        params: JsonObject,
        authorization: str | None,
    ) -> None:
        self._backend = backend
        self.session = session
        self._outbox = outbox
        self._back_channel = not backend.json_response
        self._authorization = authorization
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        self._progress_token = token if isinstance(token, str | int) and not isinstance(token, bool) else None

    @property
    def protocol_version(self) -> str:
        return self.session.protocol_version

    @property
    def authorization(self) -> str | None:
        return self._authorization

    @property
    def progress_token(self) -> str | int | None:
        return self._progress_token

    @property
    def session_flags(self) -> set[str]:
        return self.session.flags

    def notify(self, method: str, params: JsonObject) -> None:
        if self._back_channel:
            self._outbox.put_nowait(_Frame(_rpc_message(method, params), final=False))

    def log(self, level: str, data: Any) -> None:
        if LOG_LEVELS.index(level) >= LOG_LEVELS.index(self.session.log_level):
            self.notify("notifications/message", {"level": level, "logger": "demo", "data": data})

    async def request_all(
        self, requests: Sequence[tuple[str, JsonObject | None]], *, standalone: bool = False
    ) -> list[JsonObject]:
        for method, _ in requests:
            missing = self.session.missing_capability(method)
            if missing is not None:
                raise ToolFailure(f"cannot send {method}: the client did not declare the {missing} capability")
            if not standalone and not self._back_channel:
                raise ToolFailure(
                    f"cannot send {method}: the server answers in JSON mode, which has no stream to ask on"
                )
        loop = asyncio.get_running_loop()
        sent: list[tuple[str, int, asyncio.Future[JsonObject]]] = []
        timeout = self._backend.answer_timeout
        try:
            for method, params in requests:
                request_id = self.session.next_request_id()
                future: asyncio.Future[JsonObject] = loop.create_future()
                self.session.pending[request_id] = future
                sent.append((method, request_id, future))
                message = _rpc_message(method, params, request_id)
                if standalone:
                    self.session.standalone.put_nowait(message)
                else:
                    self._outbox.put_nowait(_Frame(message, final=False))
            try:
                async with asyncio.timeout(timeout):
                    answers = await asyncio.gather(*(future for _, _, future in sent))
            except TimeoutError as exc:
                methods = ", ".join(method for method, _, _ in sent)
                raise ToolFailure(f"no answer to {methods} within {timeout:g} s") from exc
        finally:
            for _, request_id, _ in sent:
                self.session.pending.pop(request_id, None)
        return [_result_of(method, answer) for (method, _, _), answer in zip(sent, answers, strict=True)]


def _result_of(method: str, answer: JsonObject) -> JsonObject:
    error = answer.get("error")
    if error is not None:
        detail = f"{error.get('code')}: {error.get('message')}" if isinstance(error, dict) else repr(error)
        raise ToolFailure(f"the client answered {method} with error {detail}")
    result = answer.get("result")
    if not isinstance(result, dict):
        raise ToolFailure(f"the client answered {method} without a result object")
    return result


def _http_error(
    status: int, message: str, code: int = INVALID_REQUEST, headers: Mapping[str, str] | None = None
) -> web.Response:
    body = {"jsonrpc": JSONRPC_VERSION, "id": None, "error": {"code": code, "message": message}}
    return web.json_response(body, status=status, headers=headers)


def _accepts(header: str, media_types: Iterable[str]) -> bool:
    offered = {part.split(";")[0].strip().lower() for part in header.split(",")}
    if "*/*" in offered:
        return True
    return all(media in offered or media.split("/")[0] + "/*" in offered for media in media_types)


def _sse_event(message: JsonObject) -> bytes:
    return f"event: message\ndata: {json.dumps(message, separators=(',', ':'))}\n\n".encode()


def _sse_headers(session: DemoSession) -> dict[str, str]:
    return {
        hdrs.CONTENT_TYPE: "text/event-stream",
        hdrs.CACHE_CONTROL: "no-cache, no-transform",
        SESSION_HEADER: session.session_id,
    }


class DemoBackend:
    """The server. Build the aiohttp application with :meth:`app`."""

    def __init__(
        self,
        *,
        path: str = "/mcp",
        versions: Sequence[str] = HANDSHAKE_PROTOCOL_VERSIONS,
        json_response: bool = False,
        answer_timeout: float = 300.0,
        keepalive_interval: float = 15.0,
    ) -> None:
        if not versions:
            raise ValueError("versions must name at least one protocol revision")
        self.path = path
        self.versions: tuple[str, ...] = tuple(versions)
        self.json_response = json_response
        self.answer_timeout = answer_timeout
        self.keepalive_interval = keepalive_interval

        self._sessions: dict[str, DemoSession] = {}
        self._tasks = TaskGroup("demo-calls")
        self._closing = asyncio.Event()

    @property
    def sessions(self) -> Mapping[str, DemoSession]:
        """Live sessions by id (read-only view)."""
        return MappingProxyType(self._sessions)

    def app(self) -> web.Application:
        app = web.Application()
        app[DEMO_BACKEND_KEY] = self
        app.router.add_route("*", self.path, self._handle)
        app.on_shutdown.append(self._on_shutdown)
        app.cleanup_ctx.append(self._lifecycle)
        return app

    async def _lifecycle(self, app: web.Application) -> AsyncIterator[None]:
        self._closing = asyncio.Event()
        self._tasks = TaskGroup("demo-calls")  # one per run of the app: a closed group stays closed
        yield
        self._closing.set()
        await self._tasks.aclose()
        self._sessions.clear()

    async def _on_shutdown(self, app: web.Application) -> None:
        self._closing.set()
        for session in list(self._sessions.values()):
            self._end_session(session)
        await self._tasks.aclose()  # ends the calls the HTTP handlers still wait for

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        return self._tasks.spawn(coro, name="demo-call")

    def _end_session(self, session: DemoSession) -> None:
        self._sessions.pop(session.session_id, None)
        session.standalone.put_nowait(None)
        for task in list(session.calls.values()):
            task.cancel()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == hdrs.METH_POST:
            return await self._post(request)
        if request.method == hdrs.METH_GET:
            return await self._get(request)
        if request.method == hdrs.METH_DELETE:
            return self._delete(request)
        return _http_error(405, "Method Not Allowed", headers={hdrs.ALLOW: "GET, POST, DELETE"})

    def _session(self, request: web.Request) -> DemoSession | web.Response:
        session_id = request.headers.get(SESSION_HEADER)
        if not session_id:
            return _http_error(400, "Bad Request: Missing session ID")
        session = self._sessions.get(session_id)
        if session is None:
            return _http_error(404, "Not Found: Session not found")
        version = request.headers.get(VERSION_HEADER)
        if version is None and session.protocol_version >= VERSION_HEADER_SINCE:
            return _http_error(400, f"Bad Request: {VERSION_HEADER} header is required")
        if version is not None and version != session.protocol_version:
            return _http_error(
                400, f"Bad Request: {VERSION_HEADER} does not match the negotiated {session.protocol_version}"
            )
        return session

    async def _post(self, request: web.Request) -> web.StreamResponse:
        wanted = ("application/json",) if self.json_response else ("application/json", "text/event-stream")
        if not _accepts(request.headers.get(hdrs.ACCEPT, ""), wanted):
            return _http_error(406, f"Not Acceptable: Client must accept {' and '.join(wanted)}")
        if request.content_type != "application/json":
            return _http_error(415, "Unsupported Media Type: Content-Type must be application/json")
        try:
            message = json.loads(await request.read())
        except ValueError:
            return _http_error(400, "Parse error: body is not JSON", PARSE_ERROR)
        if not isinstance(message, dict) or message.get("jsonrpc") != JSONRPC_VERSION:
            return _http_error(400, "Invalid Request: expected one JSON-RPC 2.0 message")

        method = message.get("method")
        if method == "initialize" and "id" in message:
            return await self._initialize(request, message)
        session = self._session(request)
        if isinstance(session, web.Response):
            return session
        if method is None:
            self._receive_response(session, message)
            return web.Response(status=202)
        if "id" not in message:
            self._receive_notification(session, message)
            return web.Response(status=202)
        request_id = message["id"]
        if not isinstance(method, str) or isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return _http_error(400, "Invalid Request: bad method or id")
        return await self._serve_request(request, session, request_id, method, message.get("params"))

    async def _initialize(self, request: web.Request, message: JsonObject) -> web.StreamResponse:
        raw = message.get("params")
        params: JsonObject = raw if isinstance(raw, dict) else {}
        requested = params.get("protocolVersion")
        negotiated = requested if requested in self.versions else max(self.versions)
        capabilities = params.get("capabilities")
        session = DemoSession(
            session_id=uuid.uuid4().hex,
            protocol_version=negotiated,
            client_capabilities=dict(capabilities) if isinstance(capabilities, dict) else {},
        )
        self._sessions[session.session_id] = session
        result = {
            "protocolVersion": negotiated,
            "capabilities": _capabilities(),
            "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
            "instructions": INSTRUCTIONS,
        }
        outbox: asyncio.Queue[_Frame | None] = asyncio.Queue()
        outbox.put_nowait(_Frame({"jsonrpc": JSONRPC_VERSION, "id": message["id"], "result": result}, True))
        return await self._answer(request, session, outbox)

    def _receive_response(self, session: DemoSession, message: JsonObject) -> None:
        request_id = message.get("id")
        future = session.pending.get(request_id) if isinstance(request_id, int) else None
        if future is not None and not future.done():
            future.set_result(message)

    def _receive_notification(self, session: DemoSession, message: JsonObject) -> None:
        params = message.get("params")
        if message.get("method") != "notifications/cancelled" or not isinstance(params, dict):
            return
        request_id = params.get("requestId")
        if isinstance(request_id, str | int) and not isinstance(request_id, bool):
            call = session.calls.get(request_id)
            if call is not None:
                call.cancel()

    async def _serve_request(
        self, request: web.Request, session: DemoSession, request_id: RequestId, method: str, params: object
    ) -> web.StreamResponse:
        outbox: asyncio.Queue[_Frame | None] = asyncio.Queue()
        ctx = _CallContext(
            self,
            session,
            outbox,
            params if isinstance(params, dict) else {},
            request.headers.get(hdrs.AUTHORIZATION),
        )
        task = self._spawn(self._run(ctx, outbox, request_id, method, params))
        session.calls[request_id] = task

        def finished(done: asyncio.Task[None]) -> None:
            # Wakes the HTTP handler even when the task was cancelled before it ever ran.
            outbox.put_nowait(None)
            if session.calls.get(request_id) is done:
                del session.calls[request_id]

        task.add_done_callback(finished)
        return await self._answer(request, session, outbox)

    async def _run(
        self,
        ctx: _CallContext,
        outbox: asyncio.Queue[_Frame | None],
        request_id: RequestId,
        method: str,
        params: object,
    ) -> None:
        try:
            if params is not None and not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "params must be an object")
            result = await self._dispatch(ctx, method, params or {})
            response: JsonObject = {"jsonrpc": JSONRPC_VERSION, "id": request_id, "result": result}
        except RpcError as exc:
            response = {"jsonrpc": JSONRPC_VERSION, "id": request_id, "error": exc.to_json()}
        except Exception:
            # deny-on-error: a broken handler answers -32603 instead of taking the server down.
            logger.exception("demo backend failed on %s", method)
            response = {
                "jsonrpc": JSONRPC_VERSION,
                "id": request_id,
                "error": {"code": INTERNAL_ERROR, "message": "Internal error"},
            }
        outbox.put_nowait(_Frame(response, final=True))

    async def _dispatch(self, ctx: _CallContext, method: str, params: JsonObject) -> JsonObject:
        match method:
            case "ping":
                return {}
            case "tools/list":
                return tools.list_tools()
            case "tools/call":
                return await tools.call_tool(ctx, params)
            case "prompts/list":
                return tools.list_prompts()
            case "prompts/get":
                return tools.get_prompt(params)
            case "resources/list":
                return tools.list_resources()
            case "resources/templates/list":
                return tools.list_resource_templates()
            case "resources/read":
                return tools.read_resource(params)
            case "completion/complete":
                return tools.complete(params)
            case "logging/setLevel":
                level = params.get("level")
                if level not in LOG_LEVELS:
                    raise RpcError(INVALID_PARAMS, f"Unknown log level: {level}")
                ctx.session.log_level = level
                return {}
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    async def _answer(
        self, request: web.Request, session: DemoSession, outbox: asyncio.Queue[_Frame | None]
    ) -> web.StreamResponse:
        """Write a request's frames: one JSON body, or SSE events up to the final response.

        A client that disconnects does not cancel the call (legacy rule); its frames are dropped.
        """
        if self.json_response:
            while (frame := await outbox.get()) is not None:
                if frame.final:
                    return web.json_response(frame.message, headers={SESSION_HEADER: session.session_id})
            # Cancelled by notifications/cancelled or shutdown: a cancelled request gets no response.
            return web.Response(status=204)
        response = web.StreamResponse(headers=_sse_headers(session))
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError):
            while (frame := await outbox.get()) is not None:
                await response.write(_sse_event(frame.message))
                if frame.final:
                    break
            await response.write_eof()
        return response

    async def _get(self, request: web.Request) -> web.StreamResponse:
        if not _accepts(request.headers.get(hdrs.ACCEPT, ""), ("text/event-stream",)):
            return _http_error(406, "Not Acceptable: Client must accept text/event-stream")
        session = self._session(request)
        if isinstance(session, web.Response):
            return session
        if session.standalone_open:
            return _http_error(409, "Conflict: Only one SSE stream is allowed per session")
        session.standalone_open = True
        try:
            response = web.StreamResponse(headers=_sse_headers(session))
            await response.prepare(request)
            with contextlib.suppress(ConnectionResetError):
                while True:
                    try:
                        async with asyncio.timeout(self.keepalive_interval):
                            message = await session.standalone.get()
                    except TimeoutError:
                        await response.write(b": keep-alive\n\n")
                        continue
                    if message is None:
                        break
                    await response.write(_sse_event(message))
                await response.write_eof()
            return response
        finally:
            session.standalone_open = False

    def _delete(self, request: web.Request) -> web.StreamResponse:
        session = self._session(request)
        if isinstance(session, web.Response):
            return session
        self._end_session(session)
        return web.Response(status=200)


DEMO_BACKEND_KEY: Final = web.AppKey("demo_backend", DemoBackend)
"""Where :meth:`DemoBackend.app` stores the backend, e.g. ``runner.app[DEMO_BACKEND_KEY]``."""


async def start_demo_backend(host: str = "127.0.0.1", port: int = 0, **opts: Any) -> tuple[web.AppRunner, str]:
    """Serve a :class:`DemoBackend` built from ``opts``; return the runner and the MCP URL.

    The caller owns the runner and ends it with ``await runner.cleanup()``. Port 0 picks a
    free port; the returned URL names the one actually bound.
    """
    backend = DemoBackend(**opts)
    runner = web.AppRunner(backend.app(), shutdown_timeout=5.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_port = runner.addresses[0][1]
    except BaseException:  # a cancelled start too: the runner is cleaned up either way
        await runner.cleanup()
        raise
    netloc = f"[{host}]" if ":" in host else host
    return runner, f"http://{netloc}:{bound_port}{backend.path}"


async def _serve(host: str, port: int, opts: JsonObject) -> None:
    runner, url = await start_demo_backend(host, port, **opts)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    print(f"mrtr demo backend (legacy MCP) listening on {url}", flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m gateway.demo.backend [--host H] [--port N] [--json-response] [--version V]…``."""
    parser = argparse.ArgumentParser(
        prog="python -m gateway.demo.backend", description="Run the mrtr demo backend, a small legacy MCP server."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port (default 8765)")
    parser.add_argument("--path", default="/mcp")
    parser.add_argument("--json-response", action="store_true", help="answer application/json, not SSE")
    parser.add_argument(
        "--version",
        action="append",
        choices=HANDSHAKE_PROTOCOL_VERSIONS,
        help="a protocol revision to offer; repeat for several (default: all handshake revisions)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    opts: JsonObject = {"path": args.path, "json_response": args.json_response}
    if args.version:
        opts["versions"] = args.version
    asyncio.run(_serve(args.host, args.port, opts))


if __name__ == "__main__":
    main()
