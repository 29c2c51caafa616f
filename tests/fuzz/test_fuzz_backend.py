"""Property-based fuzzing of what backends answer (issue 17): every backend byte is answered without
an HTTP 500 from the gateway, and no call hangs.

A fuzzing backend (tests/emitters.py) answers each ``tools/call`` with bytes hypothesis chose:
random bytes, valid JSON-RPC answers mutated byte by byte, nesting far past and right at
:data:`~gateway.legacy.wire.MAX_NESTING`, invalid UTF-8, JSON-RPC messages of every wrong shape, in
random SSE framing cut into random pieces - as a streamable-HTTP JSON body or SSE stream (with a
random status and content type), on the HTTP+SSE stream, as stdio lines, as the ``initialize``
answer and on the standalone GET stream. The property: the client's answer is never HTTP 500; a
502/503 is the gateway's own JSON-RPC error; anything else is one valid JSON-RPC answer
(tests/fuzz/live.py :func:`check_answer`); and each call ends within its bound.
``test_healthz_stays_fast_while_backends_answer_garbage`` checks /healthz meanwhile (median < 10 ms).

CI size: a few hundred examples in all. A long run: ``MRTR_FUZZ_EXAMPLES=2500 pytest -p
no:cacheprovider --timeout=0 tests/fuzz/test_fuzz_backend.py`` (four properties: 10,000 cases); the
figures (cases, statuses, HTTP 500s, /healthz median) are printed at the end and appended to
``MRTR_FUZZ_PROGRESS`` when it is set.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import os
import statistics
import threading
import time
from collections import Counter
from collections.abc import Coroutine, Iterator
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import aiohttp
import pytest
from aiohttp import web
from emitters import (
    PLACEHOLDER,
    HttpSseEmitter,
    StreamableEmitter,
    answer,
    as_event,
    emit_args,
    http_sse_emitter,
    stdio_command,
    streamable_emitter,
)
from hypothesis import given
from hypothesis import strategies as st
from live import FUZZ_KEY, ProtocolViolation, check_answer, count_case, fuzz_settings

from gateway.app import build_app
from gateway.config.load import parse_config
from gateway.legacy.wire import MAX_NESTING

T = TypeVar("T")

pytestmark = pytest.mark.filterwarnings(
    # bodies nested tens of thousands deep are the point: their repr (for a report) is large
    "ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning"
)

CALL_BOUND = 15.0
"""Seconds one call may take (every route's backend timeout is 1 s): past it, the call hung."""
HEALTHZ_MEDIAN = 0.010
_MODERN = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "emit",
}

# -- what backends answer ------------------------------------------------------------------------------

VALID: list[bytes] = [
    answer("ok"),
    b'{"jsonrpc":"2.0","id":@ID@,"error":{"code":-32602,"message":"bad arguments","data":{"x":[1]}}}',
    b'{"jsonrpc":"2.0","id":@ID@,"result":{"content":[],"structuredContent":{"a":[1,2.5,{"b":null}]},"isError":false}}',
    b'[{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}},'
    b'{"jsonrpc":"2.0","id":@ID@,"result":{"content":[]}}]',
    b'{"jsonrpc":"2.0","id":"s1","method":"elicitation/create",'
    b'"params":{"message":"?","requestedSchema":{"type":"object","properties":{}}}}',
    b'{"jsonrpc":"2.0","id":"p1","method":"ping"}',
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}',
]
INVALID_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xc0\xaf", b"\xe2\x82"]
_ID_MARK = "\x00id"
"""Where a generated message's ``id`` is the backend request's own (``@ID@`` once encoded)."""

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)


def _encode(value: Any) -> bytes:
    return json.dumps(value).encode().replace(json.dumps(_ID_MARK).encode(), PLACEHOLDER)


@st.composite
def shaped(draw: st.DrawFn) -> bytes:
    """A JSON-RPC message of any shape, right or wrong: each member present or not, of any type."""
    message: dict[str, Any] = {}
    if draw(st.booleans()):
        message["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2, None]))
    if draw(st.booleans()):
        message["id"] = draw(st.sampled_from([_ID_MARK, _ID_MARK, "other", 1.5, None, True, [1], {"a": 1}, 2**70]))
    for key in draw(st.lists(st.sampled_from(["result", "error", "method", "params"]), unique=True, max_size=3)):
        if key == "method":
            names = ["ping", "elicitation/create", "roots/list", "sampling/createMessage", "notifications/message"]
            message[key] = draw(st.sampled_from(names) | json_values)
        elif key == "error":
            code = st.sampled_from([-32602, -32601, -32603, -32042, 0]) | json_values
            error = st.fixed_dictionaries({}, optional={"code": code, "message": json_values, "data": json_values})
            message[key] = draw(error | json_values)
        else:
            message[key] = draw(json_values)
    return _encode(message)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid answer with a few bytes flipped, dropped, inserted, or the rest cut off."""
    body = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, max(len(body) - 1, 0)))
        byte = draw(st.integers(0, 255))
        op = draw(st.sampled_from(["flip", "drop", "insert", "cut"]))
        if op == "flip" and body:
            body[at] ^= byte or 1
        elif op == "drop" and body:
            del body[at]
        elif op == "insert":
            body.insert(at, byte)
        elif op == "cut":
            del body[at:]
    return bytes(body)


@st.composite
def deep(draw: st.DrawFn) -> bytes:
    """Arrays or objects nested around the bound, or thousands deep; bare or inside a valid result."""
    edge = st.sampled_from([MAX_NESTING - 3, MAX_NESTING - 2, MAX_NESTING - 1, MAX_NESTING, 1_000, 10_000, 50_000])
    depth = draw(edge | st.integers(1, 3_000))
    opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}"), (b'[{"a":', b"}]")]))
    core = opener * depth + b"0" + (closer * depth if draw(st.booleans()) else b"")
    if draw(st.booleans()):
        return core
    return b'{"jsonrpc":"2.0","id":@ID@,"result":{"content":[],"x":' + core + b"}}"


@st.composite
def bad_utf8(draw: st.DrawFn) -> bytes:
    body = draw(st.sampled_from(VALID))
    at = draw(st.integers(0, len(body)))
    return body[:at] + draw(st.sampled_from(INVALID_UTF8)) + body[at:]


bodies = st.one_of(
    st.binary(max_size=300),
    st.sampled_from(VALID),
    mutated(),
    deep(),
    bad_utf8(),
    shaped(),
    st.lists(shaped(), max_size=3).map(lambda items: b"[" + b",".join(items) + b"]"),
)


@st.composite
def sse_stream(draw: st.DrawFn, *, answered: st.SearchStrategy[bool]) -> bytes:
    """Events in random framing: any field names, separators and line ends, values from
    :data:`bodies`; and, as ``answered`` draws, a valid answer after them."""
    end = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    names = st.sampled_from([b"data", b"data", b"data", b"event", b"id", b"retry", b"", b"dat", b":"])
    values = bodies | st.sampled_from([b"message", b"endpoint", b"0", b"3", b"99999999", b""])
    out = bytearray()
    for _ in range(draw(st.integers(0, 4))):
        for name, value in draw(st.lists(st.tuples(names, values), max_size=4)):
            out += name + draw(st.sampled_from([b": ", b":", b""])) + value + end
        out += end
    if draw(answered):
        out += as_event(answer("after"))
    return bytes(out)


@st.composite
def cut_points(draw: st.DrawFn, body: bytes) -> list[int]:
    return draw(st.lists(st.integers(0, len(body)), max_size=5))


mostly_answered = st.sampled_from([True, True, True, False])
"""Most garbage is followed by a valid answer: without one a call waits for its backend timeout."""


@st.composite
def streamable_answers(draw: st.DrawFn) -> dict[str, Any]:
    """The arguments of one call to the streamable-HTTP backend: a JSON body or an SSE stream."""
    if draw(st.booleans()):
        body = draw(sse_stream(answered=st.booleans()))
        return emit_args(body, mode="sse", cuts=draw(cut_points(body)))
    status = draw(st.sampled_from([200, 200, 200, 200, 201, 202, 307, 400, 401, 403, 404, 405, 409, 500, 503]))
    ctype = draw(
        st.sampled_from(
            ["application/json"] * 4
            + ["application/json; charset=utf-8", "text/plain", "text/event-stream", "application/json-seq", "x/y"]
        )
    )
    return emit_args(draw(bodies), status=status, content_type=ctype)


# -- the gateway and backends on a loop of their own -----------------------------------------------------


class FuzzedBackends:
    """The gateway, the streamable-HTTP and HTTP+SSE emitters (and stdio servers it starts) on an
    event loop in a background thread; examples submit calls to it, each bounded."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fuzz-backends", daemon=True)
        self._stack = AsyncExitStack()
        self.base = ""
        self.streamable = StreamableEmitter()
        self.http_sse = HttpSseEmitter()
        self.http: aiohttp.ClientSession | None = None
        self.statuses: Counter[int] = Counter()
        self.server_errors: list[str] = []
        self.healthz: list[float] = []
        self._probing = False
        self._tokens = itertools.count()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def __enter__(self) -> FuzzedBackends:
        self._thread.start()
        self.run(self._start())
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.run(self._stack.aclose())
            self.run(self._cancel_the_rest())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()

    @staticmethod
    async def _cancel_the_rest() -> None:
        """End what the servers left running (handlers of streams the gateway stopped reading)."""
        rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    async def _start(self) -> None:
        self.streamable = await self._stack.enter_async_context(streamable_emitter())
        self.http_sse = await self._stack.enter_async_context(http_sse_emitter())
        fast = {"timeout": 1, "session_idle": 5}
        routes = [
            {"name": "json", "path": "/mcp", "backend": {"url": self.streamable.url, **fast}},
            {"name": "handshake", "path": "/handshake", "backend": {"url": self.streamable.url, **fast}},
            {"name": "sse", "path": "/sse", "backend": {"url": self.http_sse.url, "transport": "sse", **fast}},
            {
                "name": "stdio",
                "path": "/stdio",
                "backend": {"transport": "stdio", "command": stdio_command(), "timeout": 1},
            },
        ]
        data = {"state": {"keys": [FUZZ_KEY]}, "replica_id": "fuzz-backend", "routes": routes}
        runner = web.AppRunner(
            build_app(parse_config(data, env={})), access_log=None, shutdown_timeout=5, handler_cancellation=True
        )
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._stack.push_async_callback(runner.cleanup)
        self.base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        self.http = await self._stack.enter_async_context(aiohttp.ClientSession())

    # -- one call --------------------------------------------------------------------------------------

    def call(self, path: str, arguments: dict[str, Any], *, authorization: str | None = None) -> None:
        """Call ``emit`` on ``path`` and hold the answer to the property; within :data:`CALL_BOUND`."""
        self.run(self._call(path, arguments, authorization), timeout=CALL_BOUND + 5)

    async def _call(self, path: str, arguments: dict[str, Any], authorization: str | None) -> None:
        assert self.http is not None
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "emit", "arguments": arguments, "_meta": meta},
        }
        headers = dict(_MODERN)
        if authorization is not None:
            headers["Authorization"] = authorization
        try:
            async with asyncio.timeout(CALL_BOUND):
                payload = io.BytesIO(json.dumps(body).encode())  # over 1 MiB at times: not one write
                async with self.http.post(self.base + path, data=payload, headers=headers) as resp:
                    status, ctype, raw = resp.status, resp.content_type, await resp.read()
        except TimeoutError:
            raise ProtocolViolation(f"no answer within {CALL_BOUND}s") from None
        self.statuses[status] += 1
        if status == 500:
            self.server_errors.append(raw[:300].decode(errors="replace"))
            raise ProtocolViolation(f"HTTP 500: {raw[:300]!r}")
        if status in (502, 503):
            error = json.loads(raw)["error"]
            assert error["code"] == -32603, raw
            assert error["data"]["reason"] in ("backend_unavailable", "overloaded"), raw
            return
        check_answer(status, ctype, raw)

    def token(self) -> str:
        return f"Bearer fuzz-{next(self._tokens)}"

    # -- /healthz, probed while the examples run ------------------------------------------------------

    def start_probing(self) -> None:
        self._probing = True
        asyncio.run_coroutine_threadsafe(self._probe(), self.loop)

    def stop_probing(self) -> None:
        self._probing = False

    async def _probe(self) -> None:
        assert self.http is not None
        loop = asyncio.get_running_loop()
        while self._probing:
            started = loop.time()
            async with self.http.get(self.base + "/healthz") as resp:
                await resp.read()
            self.healthz.append(loop.time() - started)
            await asyncio.sleep(0.005)  # pacing, not waiting for anything


@pytest.fixture(scope="module")
def live() -> Iterator[FuzzedBackends]:
    with FuzzedBackends() as backends:
        backends.start_probing()
        started = time.monotonic()
        yield backends
        backends.stop_probing()
        _report(backends, time.monotonic() - started)


def _report(backends: FuzzedBackends, seconds: float) -> None:
    cases = sum(backends.statuses.values())
    median = statistics.median(backends.healthz) * 1000 if backends.healthz else float("nan")
    line = (
        f"backend fuzz: {cases} cases in {seconds:.0f}s, HTTP 500s: {len(backends.server_errors)}, "
        f"statuses {dict(sorted(backends.statuses.items()))}, /healthz median {median:.2f} ms "
        f"over {len(backends.healthz)} probes"
    )
    print("\n" + line)
    progress = os.environ.get("MRTR_FUZZ_PROGRESS")
    if progress:
        with open(progress, "a", encoding="utf-8") as out:
            out.write(f"{time.strftime('%H:%M:%S')} {line}\n")


# -- the properties --------------------------------------------------------------------------------------


@fuzz_settings(150)
@given(arguments=streamable_answers())
def test_streamable_http_answers_never_make_a_500(live: FuzzedBackends, arguments: dict[str, Any]) -> None:
    count_case("backend_streamable")
    live.call("/mcp", arguments)


@fuzz_settings(50)
@given(handshake=bodies, get_stream=sse_stream(answered=st.booleans()), valid=st.booleans())
def test_initialize_answers_and_get_streams_never_make_a_500(
    live: FuzzedBackends, handshake: bytes, get_stream: bytes, valid: bool
) -> None:
    """A fresh credential per example: a session of its own, so its handshake and GET stream are
    this example's (``valid``: a correct ``initialize`` answer, to reach the GET stream and the call)."""
    count_case("backend_handshake")
    token = live.token()
    if not valid:
        live.streamable.handshakes[token] = handshake
    live.streamable.get_streams[token] = [get_stream]
    live.call("/handshake", emit_args(answer()), authorization=token)


@fuzz_settings(50)
@given(stream=sse_stream(answered=mostly_answered), close=st.booleans())
def test_http_sse_streams_never_make_a_500(live: FuzzedBackends, stream: bytes, close: bool) -> None:
    count_case("backend_http_sse")
    live.call("/sse", emit_args(stream, close=close))


@fuzz_settings(40)
@given(lines=st.lists(bodies, max_size=3), end=st.sampled_from([b"\n", b"\r\n", b""]), answered=mostly_answered)
def test_stdio_lines_never_make_a_500(live: FuzzedBackends, lines: list[bytes], end: bytes, answered: bool) -> None:
    count_case("backend_stdio")
    out = b"".join(line + end for line in lines)
    if answered:
        out += b"\n" + answer("after") + b"\n"
    live.call("/stdio", emit_args(out))


def test_healthz_stays_fast_while_backends_answer_garbage(live: FuzzedBackends) -> None:
    """/healthz, probed back to back all through this module (the properties' examples included),
    and here while calls are answered with the heaviest garbage (deep nesting, large and invalid
    bodies, event floods), one after another as the properties send them: its median stays under
    10 ms. Pessimistic: the backends and the client run on the gateway's own event loop here."""
    heavy = [
        emit_args(b"[" * 50_000 + b"]" * 50_000),
        emit_args(b'{"jsonrpc":"2.0","id":@ID@,"result":{"x":' + b'{"a":' * 20_000 + b"0" + b"}" * 20_000 + b"}}"),
        emit_args(
            b'{"jsonrpc":"2.0","id":@ID@,"result":{"content":[{"type":"text","text":"' + b"x\xff" * 200_000 + b'"}]}}'
        ),
        emit_args(answer("y" * 600_000)),
        emit_args(as_event(b"[" * 30_000) * 20 + as_event(answer()), mode="sse"),
        emit_args(b": comment\n\n" * 20_000 + as_event(answer()), mode="sse"),
    ]
    probes_before = len(live.healthz)
    for arguments in heavy * 5:
        live.call("/mcp", arguments)
    during = live.healthz[probes_before:]
    assert len(during) >= 10, during
    assert statistics.median(during) < HEALTHZ_MEDIAN, sorted(during)
    assert statistics.median(live.healthz) < HEALTHZ_MEDIAN
