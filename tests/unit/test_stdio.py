"""The stdio backend session against a tiny fake stdio server (a Python script run as the child).

The fake speaks newline-delimited JSON-RPC on stdin/stdout like the SDK servers do: it answers
``initialize``, and its ``tools/call`` tools each exercise one path of the session - answers out of
order (``hold`` + ``release``), a server request (``ask``), a ``ping`` from the server, a
notification, an abrupt exit (``die``), prints that are not JSON-RPC (``garbage``). Like many
published servers it prints a banner on stdout before serving. Every wait is bounded by ``WAIT``;
nothing sleeps.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from waiting import eventually

from gateway.config.load import parse_config
from gateway.errors import BackendUnavailable
from gateway.legacy import stdio_process
from gateway.legacy.limits import BackendLimits
from gateway.legacy.pool import SessionPool
from gateway.legacy.session import Exchange, ExchangeEvent, FinalResponse, ServerNotification, ServerRequest
from gateway.legacy.starts import StartBudget, tree_cpu_ticks
from gateway.legacy.stdio import StdioSession

WAIT = 5.0
CAPABILITIES = {"elicitation": {"form": {}}, "roots": {"listChanged": False}}

FAKE_SERVER = textwrap.dedent(
    """
    import json, os, sys

    held = []

    def send(message):
        sys.stdout.write(json.dumps(message) + "\\n")
        sys.stdout.flush()

    def answer(request_id, text):
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}})

    def read():
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        return json.loads(line)

    def await_response(request_id):
        while True:
            message = read()
            if message.get("id") == request_id and "method" not in message:
                return message

    print("fake stdio server starting", file=sys.stderr, flush=True)
    print("Fake MCP Server running on stdio", flush=True)
    while True:
        message = read()
        method, params = message.get("method"), message.get("params", {})
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake-stdio", "version": "0"},
                "instructions": json.dumps(params["capabilities"]),
            }})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        elif method == "tools/call":
            name, args = params["name"], params.get("arguments", {})
            if name == "hold":
                held.append((message["id"], args["tag"]))
            elif name == "release":
                for request_id, tag in reversed(held):
                    answer(request_id, "held " + tag)
                held.clear()
                answer(message["id"], "released")
            elif name == "ask":
                send({"jsonrpc": "2.0", "id": "s1", "method": "elicitation/create",
                      "params": {"message": "Which city?", "requestedSchema": {"type": "object"}}})
                reply = await_response("s1")
                answer(message["id"], "city=" + reply["result"]["content"]["city"])
            elif name == "ping_me":
                send({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
                reply = await_response("p1")
                answer(message["id"], "pong " + json.dumps(reply["result"]))
            elif name == "notify":
                send({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "info", "data": "working"}})
                answer(message["id"], "notified")
            elif name == "env":
                answer(message["id"], json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}))
            elif name == "garbage":
                for line in ["this is not JSON", "DEBUG: args=" + json.dumps(args), "42", '{"not": "json-rpc"}',
                             "[1, 2]", "\\xff\\xfe invalid utf-8?", "x" * 5000]:
                    print(line, flush=True)
                sys.stdout.buffer.write(b"\\xff\\xfe\\n")
                sys.stdout.flush()
                answer(message["id"], "after the noise")
            elif name == "long_line":
                answer(message["id"], "x" * args["size"])
            elif name == "die":
                sys.exit(3)
    """
)


@pytest.fixture
def fake_server(tmp_path: Path) -> list[str]:
    script = tmp_path / "fake_stdio_server.py"
    script.write_text(FAKE_SERVER, encoding="utf-8")
    return [sys.executable, str(script)]


def new_session(command: list[str], **kw: Any) -> StdioSession:
    return StdioSession(command, capabilities=CAPABILITIES, timeout=WAIT, connect_timeout=WAIT, **kw)


@asynccontextmanager
async def opened(command: list[str], **kw: Any) -> AsyncIterator[StdioSession]:
    session = new_session(command, **kw)
    async with asyncio.timeout(WAIT):
        await session.open()
    try:
        yield session
    finally:
        async with asyncio.timeout(WAIT):
            await session.close()


async def call(session: StdioSession, name: str, **arguments: Any) -> Exchange:
    return await session.start("tools/call", {"name": name, "arguments": arguments}, {"Authorization": "Bearer x"})


async def next_event(exchange: Exchange) -> ExchangeEvent:
    return await exchange.next(WAIT)


async def final_text(exchange: Exchange) -> str:
    while True:
        event = await next_event(exchange)
        if isinstance(event, FinalResponse):
            assert event.result is not None, event.error
            text: str = event.result["content"][0]["text"]
            return text


async def failure_of(exchange: Exchange) -> BackendUnavailable:
    """The failure that ends ``exchange`` (server requests and notifications before it are skipped)."""
    while True:
        try:
            event = await next_event(exchange)
        except BackendUnavailable as exc:
            return exc
        assert not isinstance(event, FinalResponse), event


def assert_reaped(pid: int | None) -> None:
    """The child is gone and was waited for: not running, and not a zombie either."""
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# --- handshake -----------------------------------------------------------------------------------


async def test_open_initializes_with_the_session_capabilities(fake_server: list[str]) -> None:
    async with opened(fake_server) as session:
        assert session.protocol_version == "2025-11-25"
        assert session.initialize_result["serverInfo"]["name"] == "fake-stdio"
        assert json.loads(session.initialize_result["instructions"]) == CAPABILITIES
        assert not session.broken


async def test_child_gets_a_minimal_environment_plus_the_route_env(
    fake_server: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MRTR_TEST_GATEWAY_SECRET", "must-not-leak")
    async with opened(fake_server, env={"SERVER_OPTION": "on"}, cwd=str(tmp_path)) as session:
        seen = json.loads(await final_text(await call(session, "env")))
    assert seen["env"]["SERVER_OPTION"] == "on"
    assert "MRTR_TEST_GATEWAY_SECRET" not in seen["env"]
    assert set(seen["env"]) - {"SERVER_OPTION", "LC_CTYPE"} <= set(stdio_process.INHERITED_ENV)
    assert Path(seen["cwd"]).resolve() == tmp_path.resolve()


# --- requests and answers ------------------------------------------------------------------------


async def test_concurrent_requests_get_their_own_answers_by_id(fake_server: list[str]) -> None:
    async with opened(fake_server) as session:
        first = await call(session, "hold", tag="first")
        second = await call(session, "hold", tag="second")
        release = await call(session, "release")
        # The fake answers in reverse order: second, then first, then the release itself.
        assert await final_text(second) == "held second"
        assert await final_text(first) == "held first"
        assert await final_text(release) == "released"


async def test_a_server_request_reaches_the_attached_exchange_and_its_answer_goes_back(
    fake_server: list[str],
) -> None:
    async with opened(fake_server) as session:
        exchange = await call(session, "ask")
        session.attach(exchange)
        event = await next_event(exchange)
        assert isinstance(event, ServerRequest)
        assert (event.id, event.method, event.params["message"]) == ("s1", "elicitation/create", "Which city?")
        await session.respond(event.id, result={"action": "accept", "content": {"city": "Paris"}})
        assert await final_text(exchange) == "city=Paris"


async def test_a_ping_from_the_server_is_answered_by_the_session(fake_server: list[str]) -> None:
    async with opened(fake_server) as session:
        exchange = await call(session, "ping_me")
        assert await final_text(exchange) == "pong {}"


async def test_notifications_go_to_the_exchange_and_the_sink(fake_server: list[str]) -> None:
    async with opened(fake_server) as session:
        sink: asyncio.Queue[ServerNotification] = asyncio.Queue()
        session.notification_sink = sink
        exchange = await call(session, "notify")
        session.attach(exchange)
        event = await next_event(exchange)
        assert isinstance(event, ServerNotification)
        assert event.method == "notifications/message"
        assert await final_text(exchange) == "notified"
        async with asyncio.timeout(WAIT):
            assert (await sink.get()).params["data"] == "working"


# --- failures ------------------------------------------------------------------------------------


async def test_process_exit_fails_every_call_in_flight_and_breaks_the_session(fake_server: list[str]) -> None:
    async with opened(fake_server) as session:
        held = await call(session, "hold", tag="never")
        dying = await call(session, "die")
        assert (await failure_of(held)).reason == "stream_closed"
        assert (await failure_of(dying)).reason == "stream_closed"
        assert session.broken
        with pytest.raises(BackendUnavailable) as caught:
            await call(session, "release")
        assert caught.value.reason == "stream_closed"


async def test_the_attached_exchange_fails_too_when_the_process_exits(fake_server: list[str]) -> None:
    async with opened(fake_server) as session:
        exchange = await call(session, "ask")
        session.attach(exchange)
        assert isinstance(await next_event(exchange), ServerRequest)
        assert session.pid is not None
        os.kill(session.pid, 9)
        assert (await failure_of(exchange)).reason == "stream_closed"
        assert session.broken


async def test_lines_that_are_not_json_rpc_are_logged_and_skipped(fake_server: list[str]) -> None:
    """Banners and debug prints on stdout (published servers do both) do not end the session."""
    async with opened(fake_server) as session:  # the banner came before initialize's answer
        assert await final_text(await call(session, "garbage", tag="t1")) == "after the noise"
        assert not session.broken
        assert await final_text(await call(session, "long_line", size=10)) == "x" * 10


def test_skipped_lines_are_logged_truncated_and_rate_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    logged: list[dict[str, Any]] = []
    monkeypatch.setattr(stdio_process.log, "info", lambda event, **fields: logged.append({"event": event, **fields}))
    noise = stdio_process.NoiseLog("server")
    for index in range(stdio_process.NOISE_LINES_PER_WINDOW * 5):
        noise.line(b"debug %d " % index + b"y" * 100_000)
    assert len(logged) == stdio_process.NOISE_LINES_PER_WINDOW
    assert all(len(entry["line"]) <= stdio_process.NOISE_EXCERPT_CHARS for entry in logged)
    assert logged[0]["event"] == "backend_stdout_skipped"
    assert logged[0]["bytes"] > 100_000
    monkeypatch.setattr(time, "monotonic", lambda: 10**9)  # the next window (stdio reads time.monotonic)
    noise.line(b"later")
    assert logged[-1]["line"] == "later"
    assert logged[-1]["suppressed_before"] == stdio_process.NOISE_LINES_PER_WINDOW * 4


async def test_a_line_over_the_limit_is_malformed(fake_server: list[str]) -> None:
    async with opened(fake_server, limits=BackendLimits(max_message_bytes=4096)) as session:
        assert await final_text(await call(session, "long_line", size=1000)) == "x" * 1000
        exchange = await call(session, "long_line", size=10_000)
        assert (await failure_of(exchange)).reason == "malformed_response"
        assert session.broken


async def test_a_missing_command_is_spawn_failed(tmp_path: Path) -> None:
    session = new_session([str(tmp_path / "no-such-server")])
    with pytest.raises(BackendUnavailable) as caught:
        await session.open()
    assert caught.value.reason == "spawn_failed"
    assert session.broken


async def test_a_server_that_exits_before_initialize_is_spawn_failed_with_its_stderr(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "import sys; print('no config file', file=sys.stderr); sys.exit(2)"]
    session = new_session(command)
    with pytest.raises(BackendUnavailable) as caught:
        async with asyncio.timeout(WAIT):
            await session.open()
    assert caught.value.reason == "spawn_failed"
    assert "code 2" in caught.value.detail
    assert "no config file" in caught.value.detail
    assert session.returncode == 2
    assert_reaped(session.pid)


async def test_a_silent_server_times_out_and_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdio_process, "STOP_GRACE", 0.2)
    command = [sys.executable, "-c", "import sys\nfor line in sys.stdin: pass"]
    session = StdioSession(command, capabilities={}, timeout=0.3, connect_timeout=WAIT)
    with pytest.raises(BackendUnavailable) as caught:
        async with asyncio.timeout(WAIT):
            await session.open()
    assert caught.value.reason == "timeout"
    assert session.returncode is not None
    assert_reaped(session.pid)


# --- close ---------------------------------------------------------------------------------------


async def test_close_reaps_the_child(fake_server: list[str]) -> None:
    async with opened(fake_server) as session:
        pid = session.pid
        assert session.returncode is None
        os.kill(pid or 0, 0)  # running
    assert cast("int | None", session.returncode) == 0  # it exited on its own when stdin closed
    assert session.broken
    assert_reaped(pid)


async def test_close_escalates_to_signals_for_a_server_that_ignores_stdin_and_sigterm(
    fake_server: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stdio_process, "STOP_GRACE", 0.2)
    stubborn = tmp_path / "stubborn.py"
    stubborn.write_text(
        "import signal, sys, threading\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        + FAKE_SERVER.replace("sys.exit(0)", "threading.Event().wait()"),
        encoding="utf-8",
    )
    async with opened([sys.executable, str(stubborn)]) as session:
        pid = session.pid
        assert await final_text(await call(session, "release")) == "released"
    assert session.returncode == -9
    assert_reaped(pid)


async def test_the_pool_opens_one_process_per_session_and_closes_them(fake_server: list[str]) -> None:
    backend = {"transport": "stdio", "command": fake_server, "timeout": WAIT}
    route = {"name": "stdio", "path": "/mcp", "backend": backend}
    settings = parse_config({"state": {"keys": ["k" * 32]}, "routes": [route]}, env={})
    pool = SessionPool(None, settings.routes[0])  # type: ignore[arg-type]  # stdio never uses HTTP
    key = pool.key_for("Bearer a", CAPABILITIES)
    async with asyncio.timeout(WAIT):
        first = await pool.lease(key, CAPABILITIES, {"Authorization": "Bearer a"})
        second = await pool.lease(key, CAPABILITIES, {"Authorization": "Bearer a"})
    sessions = [first.session, second.session]
    assert all(isinstance(s, StdioSession) for s in sessions)
    pids = [s.pid for s in sessions if isinstance(s, StdioSession)]
    assert len(set(pids)) == 2
    assert pool.initializations == 2
    async with asyncio.timeout(WAIT):
        await pool.close()
    for pid in pids:
        assert_reaped(pid)


class Started:
    """The pids of the processes a pool starts, in order: the watch a start budget hands each stdio
    session (:class:`~gateway.legacy.starts.ProcessWatch`, the memory guard's seam), so a test reads
    the pool's processes without its private parts."""

    def __init__(self) -> None:
        self.pids: list[int] = []

    def admit(self) -> None:
        """Every start may go ahead."""

    def started(self, process: asyncio.subprocess.Process) -> None:
        self.pids.append(process.pid)

    def budget(self) -> StartBudget:
        """A budget that never holds a start back (room for more than any test here starts at once)."""
        return StartBudget(8, watch=lambda route: self)


async def test_the_pool_keeps_spare_processes_and_a_call_only_does_the_handshake(fake_server: list[str]) -> None:
    """``prewarm``: processes started ahead of need; a lease takes one (same pid), declares the
    caller's capabilities in its handshake, and a new spare is started in its place."""
    backend = {"transport": "stdio", "command": fake_server, "timeout": WAIT, "prewarm": 1, "max_sessions": 2}
    route = {"name": "stdio", "path": "/mcp", "backend": backend}
    settings = parse_config({"state": {"keys": ["k" * 32]}, "routes": [route]}, env={})
    started = Started()
    pool = SessionPool(None, settings.routes[0], starts=started.budget())  # type: ignore[arg-type]  # no HTTP
    pids: list[int | None] = []
    try:
        pool.prewarm()
        await eventually(lambda: pool.spare_count >= 1, what="a spare process is ready", timeout=WAIT)
        (spare_pid,) = started.pids
        key = pool.key_for("Bearer a", CAPABILITIES)
        async with asyncio.timeout(WAIT):
            leased = await pool.lease(key, CAPABILITIES, {"Authorization": "Bearer a"})
        session = leased.session
        assert isinstance(session, StdioSession)
        assert session.pid == spare_pid
        assert session._capabilities["elicitation"] == CAPABILITIES["elicitation"]
        assert (pool.initializations, pool.size) == (1, 1)
        # The spare taken is replaced, within max_sessions (2).
        await eventually(lambda: pool.spare_count >= 1, what="a new spare process is ready", timeout=WAIT)
        (new_spare,) = [pid for pid in started.pids if pid != spare_pid]
        pids = [session.pid, new_spare]
        assert pids[1] != spare_pid
    finally:
        async with asyncio.timeout(WAIT):
            await pool.close()
    for pid in pids:
        assert pid is not None
        assert_reaped(pid)


async def test_spare_processes_count_in_max_sessions(fake_server: list[str]) -> None:
    backend = {"transport": "stdio", "command": fake_server, "timeout": WAIT, "prewarm": 3, "max_sessions": 2}
    route = {"name": "stdio", "path": "/mcp", "backend": backend}
    settings = parse_config({"state": {"keys": ["k" * 32]}, "routes": [route]}, env={})
    pool = SessionPool(None, settings.routes[0])  # type: ignore[arg-type]  # stdio never uses HTTP
    try:
        pool.prewarm()
        await eventually(lambda: pool.spare_count >= 2, what="two spare processes are ready", timeout=WAIT)
        assert pool.footprint == 2, "never more processes than max_sessions"
        key = pool.key_for("Bearer a", CAPABILITIES)
        async with asyncio.timeout(WAIT):
            leased = [await pool.lease(key, CAPABILITIES, {}) for _ in range(2)]
        assert pool.footprint == 2
        assert pool.initializations == 2
        for pooled in leased:
            pool.release(pooled)
    finally:
        async with asyncio.timeout(WAIT):
            await pool.close()


STRICT_SERVER = textwrap.dedent(
    """
    import json, sys

    # Like mcp 1.6-1.8: any request before notifications/initialized ends the process.
    log = open(sys.argv[1], "a")
    initialized = False
    for line in sys.stdin:
        log.write(line)
        log.flush()
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": message["params"]["protocolVersion"], "capabilities": {},
                "serverInfo": {"name": "strict", "version": "0"}}}) + "\\n")
            sys.stdout.flush()
        elif method == "notifications/initialized":
            initialized = True
        elif not initialized:
            sys.exit("Received request before initialization was complete")
        elif "id" in message:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}) + "\\n")
            sys.stdout.flush()
    """
)


async def test_a_spare_is_sent_nothing_before_initialize(tmp_path: Path) -> None:
    """A spare waits for its server to load without writing to it; the call that takes it sends
    ``initialize`` first (servers on older SDKs exit on any earlier request)."""
    script, received = tmp_path / "strict.py", tmp_path / "received.jsonl"
    script.write_text(STRICT_SERVER, encoding="utf-8")
    received.touch()
    spare = new_session([sys.executable, str(script), str(received)])
    try:
        async with asyncio.timeout(WAIT):
            await spare.spawn()
        assert spare.spawned
        assert received.read_text() == "", "nothing written while the spare waits"
        async with asyncio.timeout(WAIT):
            await spare.open()
        assert spare.spawned, "the server took the handshake"
        methods = [json.loads(line)["method"] for line in received.read_text().splitlines()]
        assert methods[:2] == ["initialize", "notifications/initialized"], methods
    finally:
        async with asyncio.timeout(WAIT):
            await spare.close()


async def test_a_spare_start_ends_once_its_process_tree_is_quiet(tmp_path: Path) -> None:
    """The start budget's place is held while the server loads: a process that burns the CPU for
    0.6 s before it reads its stdin (in a child of its own, as ``npx`` starts ``node``) is not
    taken as started before that."""
    loader = (
        "import sys, time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\nsys.stdin.read()"
    )
    launcher = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {loader!r}])"
    spare = new_session([sys.executable, "-c", launcher])
    try:
        loop = asyncio.get_running_loop()
        began = loop.time()
        async with asyncio.timeout(WAIT):
            await spare.spawn()
        assert loop.time() - began >= 0.6
        assert spare.spawned
    finally:
        async with asyncio.timeout(WAIT):
            await spare.close()


def test_tree_cpu_ticks_reads_a_process_and_none_for_a_missing_one() -> None:
    assert isinstance(tree_cpu_ticks(os.getpid()), int)
    with subprocess.Popen([sys.executable, "-c", "pass"]) as child:
        child.wait()
    assert tree_cpu_ticks(child.pid) is None


def _oom_score_adj(pid: int) -> int:
    with open(f"/proc/{pid}/oom_score_adj") as adj:
        return int(adj.read())


async def test_a_server_and_its_children_are_the_oom_killer_s_choice_before_the_gateway(tmp_path: Path) -> None:
    """``backend.oom_score_adj`` (default 1000) is set on the server as it starts and inherited by
    the children it forks afterwards (as ``npx`` starts ``node``); the gateway's own stays as it was."""
    pid_file = tmp_path / "child.pid"
    launcher = (
        "import subprocess, sys, time\n"
        "time.sleep(0.3)\n"  # the server's own start-up, before it forks its child
        "child = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "sys.stdin.read()\n"
    )
    settings = parse_config(
        {
            "state": {"keys": ["k" * 32]},
            "routes": [
                {
                    "name": "s",
                    "path": "/mcp",
                    "backend": {"transport": "stdio", "command": [sys.executable, "-c", launcher]},
                }
            ],
        },
        env={},
    )
    route = settings.routes[0]
    assert route.backend.oom_score_adj == 1000
    server = StdioSession.for_route(route, CAPABILITIES)
    try:
        async with asyncio.timeout(WAIT):
            await server.spawn()
        await eventually(
            lambda: pid_file.exists() and pid_file.read_text(),
            what="the server forked its child (and wrote its pid)",
            timeout=WAIT,
            interval=0.02,
        )
        assert server.pid is not None
        assert _oom_score_adj(server.pid) == 1000
        assert _oom_score_adj(int(pid_file.read_text())) == 1000, "inherited by what it starts later"
        assert _oom_score_adj(os.getpid()) < 1000
    finally:
        async with asyncio.timeout(WAIT):
            await server.close()
