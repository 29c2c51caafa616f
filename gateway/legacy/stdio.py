"""The gateway as a handshake-era stdio client, for servers that only speak stdio.

Many MCP servers ship only the stdio transport: the client runs them as a child process and
talks JSON-RPC over the pipes. Run beside the gateway (same pod, same image), such a server is
fronted like any other: the gateway is the client that starts it.

One process per backend session. A stdio server serves exactly one session for its whole life,
so one :class:`StdioSession` is one child process, started on ``open()`` and stopped on
``close()``. The pool keys sessions as it does for HTTP (credential digest, client capabilities),
so capabilities and identity stay per session: there is no ``Authorization`` header to forward
(the process's environment is fixed when it starts), but the credential still keys the pool, so
different principals never share a process. ``backend.max_sessions`` bounds the processes.

Wire: newline-delimited JSON-RPC on stdin/stdout, one message per line, no embedded newlines
(JSON escapes them). Published servers print on stdout too - startup banners ("... running on
stdio"), debug prints - so a line that is not JSON-RPC is logged (truncated, rate-limited: see
:class:`~gateway.legacy.stdio_process.NoiseLog`) and skipped; only a line over
``max_message_bytes`` (16 MiB by default) fails the session with ``malformed_response``, as do a line nested deeper than
:data:`~gateway.legacy.wire.MAX_NESTING` and a JSON-RPC message that cannot be routed.
stderr is drained into a bounded ring buffer, logged at debug when the process is stopped. A
single reader task routes every stdout message through
:meth:`~gateway.legacy.base.LegacySessionBase._dispatch`, as :mod:`gateway.legacy.http_sse` does
for its one stream: responses by id to the waiting exchange, server requests to the attached
exchange (kept unclaimed when no call holds the lease), ``ping`` answered, notifications to the attached exchange
and to ``notification_sink``.

Failure: when stdout ends (the process exited) every exchange in flight gets ``stream_closed``
and the session is broken for good; the pool starts a new process. A process that cannot be
started, or exits before answering ``initialize``, is ``spawn_failed``. There is no session id,
so :class:`~gateway.legacy.session.SessionExpired` never happens here. ``close()`` closes stdin
(the spec's shutdown), waits up to 2 s, then sends SIGTERM, then SIGKILL, to the process group
(``start_new_session``: the server's own children go too), and always reaps the child; what is left
of its group once it is reaped (``npx``'s ``node``) gets SIGTERM, then SIGKILL (both in
:mod:`gateway.legacy.stdio_process`, with the process's environment and OOM score). Every group is
registered with :data:`~gateway.legacy.orphans.GUARD`, which kills it if the gateway itself dies.

Starting: every start holds a place in the gateway-wide :class:`~gateway.legacy.starts.StartBudget`
from ``exec`` until the server has loaded: a loading interpreter is CPU work. Nothing is written
to a server before ``initialize``: servers on older SDKs (``mcp`` 1.6-1.8, under ``chroma-mcp`` and
``markitdown-mcp``) refuse any request before the handshake, a ``ping`` included, and exit. So a
cold session's start ends with the ``initialize`` answer, and a spare's (started before the call
whose capabilities its handshake declares) when its process tree stops using the CPU
(:func:`~gateway.legacy.starts.tree_cpu_ticks`): it then waits on its stdin.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from typing import Self

import structlog

from gateway import fastjson
from gateway.config.model import RouteConfig
from gateway.errors import BackendUnavailable
from gateway.legacy.base import route_options
from gateway.legacy.demux import DemuxedSession
from gateway.legacy.limits import BackendLimits
from gateway.legacy.orphans import GUARD
from gateway.legacy.session import JsonObj
from gateway.legacy.starts import PROC_READABLE, QUIET_FOR, QUIET_SAMPLE, ProcessWatch, StartBudget, tree_cpu_ticks
from gateway.legacy.stdio_process import NoiseLog, child_env, end_group, set_oom_score_adj, stop_process
from gateway.legacy.wire import message_size, parse_messages

log = structlog.get_logger("gateway.legacy")

STDERR_TAIL_BYTES = 8 * 1024
READER_GRACE = 0.5
"""Seconds the pipe readers get to reach end of file once the process is gone."""


class StdioSession(DemuxedSession):
    """One handshake-era session with one stdio server process."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        oom_score_adj: int | None = None,
        capabilities: JsonObj,
        timeout: float,
        connect_timeout: float,
        offer_version: str | None = None,
        limits: BackendLimits | None = None,
        starts: StartBudget | None = None,
        watch: ProcessWatch | None = None,
    ) -> None:
        self._command = list(command)
        self._env = child_env(env or {})
        self._cwd = cwd
        self._oom_score_adj = oom_score_adj
        self._starts = starts
        self._watch = watch  # the memory guard's (gateway.legacy.memory): may refuse a start, watches the process
        super().__init__(
            capabilities=capabilities,
            timeout=timeout,
            connect_timeout=connect_timeout,
            offer_version=offer_version,
            limits=limits,
        )

    @classmethod
    def for_route(cls, route: RouteConfig, capabilities: JsonObj, *, starts: StartBudget | None = None) -> Self:
        """An unstarted session of ``route``'s command (``capabilities`` may be replaced before its
        handshake: a spare, see :meth:`adopt`); its start waits for a place in ``starts``, the
        gateway-wide budget."""
        backend = route.backend
        assert backend.command is not None  # the config requires it for stdio
        options = route_options(route, capabilities)
        return cls(
            backend.command,
            env=backend.env,
            cwd=backend.cwd,
            oom_score_adj=backend.oom_score_adj,
            starts=starts,
            watch=None if starts is None else starts.watch(route),
            **options,
        )

    def _init_transport(self) -> None:
        self._proc: asyncio.subprocess.Process | None = None
        self._init_demux()
        self._reader: asyncio.Task[None] | None = None
        self._stderr_reader: asyncio.Task[None] | None = None
        self._stderr_tail = bytearray()
        self._noise = NoiseLog(self._command[0])

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once the process has been reaped, else None."""
        return None if self._proc is None else self._proc.returncode

    # -- lifecycle --------------------------------------------------------------------------

    async def spawn(self) -> None:
        """Only start the process (a pool's spare): :meth:`open` then does the handshake, with the
        capabilities given to :meth:`adopt` by then. Starting the interpreter is most of a cold
        session's cost; the handshake is a few milliseconds."""
        try:
            async with self._start_slot():
                await self._spawn()
                await self._warm()
        except BaseException:  # cancelled too: a spare that did not start must not leave its process
            await self.close()
            raise

    def _start_slot(self, cold: bool = True) -> contextlib.AbstractAsyncContextManager[None]:
        """A place in the gateway-wide start budget while a process starts (none for a started spare)."""
        if cold and self._starts is not None:
            return self._starts.slot()
        return contextlib.nullcontext()

    async def _warm(self) -> None:
        """Wait, writing nothing, until the server has loaded: its process tree has used no CPU for
        :data:`~gateway.legacy.starts.QUIET_FOR` seconds. A process that exits first is
        ``spawn_failed``; one still busy after ``connect_timeout``, or on a system without
        ``/proc``, is kept as it is (its ``initialize`` then waits for it)."""
        assert self._proc is not None  # spawn() started it
        if not PROC_READABLE:
            return  # no /proc to read: taken as started
        quiet_samples = round(QUIET_FOR / QUIET_SAMPLE)
        last, quiet = None, 0
        deadline = time.monotonic() + self._connect_timeout
        while quiet < quiet_samples:
            if time.monotonic() >= deadline:
                log.info("backend_start_busy", program=self._command[0], timeout=self._connect_timeout)
                return
            ticks = tree_cpu_ticks(self._proc.pid)
            if ticks is None or not self.spawned:  # it exited (perhaps not reaped yet)
                raise await self._exited_early()
            quiet = quiet + 1 if ticks == last else 0
            last = ticks
            await asyncio.sleep(QUIET_SAMPLE)  # deliberate: sampling the process's CPU clock
        if not self.spawned:
            raise await self._exited_early()

    @property
    def spawned(self) -> bool:
        """The process was started and has not exited."""
        return self._proc is not None and self._proc.returncode is None and self._failure is None

    def adopt(self, capabilities: JsonObj) -> None:
        """Before :meth:`open`: the capabilities the handshake declares (a spare is started before
        the call whose client they come from arrives)."""
        self._capabilities = capabilities

    async def _handshake(self) -> None:
        """Start the process (unless :meth:`spawn` did) → initialize → notifications/initialized →
        ping (``_ping_after_initialize``): the ``initialize`` is the first thing the server reads."""
        cold = self._proc is None
        async with self._start_slot(cold):
            if cold:
                await self._spawn()
            try:
                init = self._register(0, "initialize")
                await self._write(self._initialize_body(), what="initialize")
                final = await self._initialize_answer(init)
            except BackendUnavailable as exc:
                if exc.reason != "stream_closed":
                    raise
                raise await self._exited_early() from exc
        self._accept_initialize(final)
        await self.notify("notifications/initialized")
        await self._ping_after_initialize()

    async def _end_transport(self) -> None:
        """Stop the process (stdin closed, then SIGTERM, then SIGKILL) and reap it; its pipe readers
        get :data:`READER_GRACE` to read to the end (a grandchild may still hold a pipe open: then
        :meth:`close` cancels them)."""
        if self._proc is not None:
            await stop_process(self._proc)
            await end_group(self._proc.pid)
        readers = [task for task in (self._reader, self._stderr_reader) if task is not None]
        if readers:
            await asyncio.wait(readers, timeout=READER_GRACE)
        if self._proc is not None:
            stderr = self._stderr_tail.decode(errors="replace")
            log.debug("backend process stopped", pid=self._proc.pid, returncode=self._proc.returncode, stderr=stderr)

    # -- requests ---------------------------------------------------------------------------

    async def _deliver(self, body: JsonObj, *, what: str) -> None:
        await self._write(body, what=what)

    # -- internals --------------------------------------------------------------------------

    async def _spawn(self) -> None:
        if self._watch is not None:
            self._watch.admit()  # Overloaded (memory_high): the container's memory is nearly used up
        try:
            async with asyncio.timeout(self._connect_timeout):
                self._proc = await asyncio.create_subprocess_exec(
                    *self._command,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=self._env,
                    cwd=self._cwd,
                    start_new_session=True,
                    limit=self._limits.max_message_bytes,
                )
        except TimeoutError:
            raise BackendUnavailable("spawn_failed", f"{self._command[0]}: not started in time") from None
        except (OSError, ValueError) as exc:
            raise BackendUnavailable("spawn_failed", f"{self._command[0]}: {exc}") from exc
        GUARD.started(self._proc.pid)  # its own group (start_new_session): the pgid is its pid
        if self._watch is not None:
            self._watch.started(self._proc)
        if self._oom_score_adj is not None:
            set_oom_score_adj(self._proc.pid, self._oom_score_adj)
        stdout, stderr = self._proc.stdout, self._proc.stderr
        assert stdout is not None  # both are pipes: see above
        assert stderr is not None
        self._reader = self._tasks.spawn(self._read_stdout(stdout), name="legacy-stdio-stdout")
        self._stderr_reader = self._tasks.spawn(self._read_stderr(stderr), name="legacy-stdio-stderr")

    async def _exited_early(self) -> BackendUnavailable:
        """The process ended before ``initialize`` was answered: say how, for the log."""
        code = None
        if self._proc is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._connect_timeout):
                    code = await self._proc.wait()
        if self._stderr_reader is not None:
            await asyncio.wait([self._stderr_reader], timeout=READER_GRACE)  # its last words
        tail = self._stderr_tail.decode(errors="replace").strip()[-200:]
        return BackendUnavailable("spawn_failed", f"{self._command[0]} exited (code {code}) before initialize: {tail}")

    async def _send_request(self, body: JsonObj, headers: dict[str, str], *, what: str) -> None:
        """``headers`` have no stdio equivalent and are not sent."""
        await self._write(body, what=what)

    async def _write(self, body: JsonObj, *, what: str) -> None:
        """Write one message as one line (ASCII JSON: no raw newline can appear inside)."""
        if self._failure is not None:
            raise BackendUnavailable(*self._failure)
        stdin = None if self._proc is None else self._proc.stdin
        if stdin is None or stdin.is_closing():
            raise BackendUnavailable("stream_closed", f"{what}: the server's stdin is closed")
        try:
            stdin.write(fastjson.dumps(body) + b"\n")
            async with asyncio.timeout(self._timeout):
                await stdin.drain()
        except TimeoutError:
            self._broken = True
            raise BackendUnavailable("timeout", f"{what}: the server does not read its stdin") from None
        except OSError as exc:  # BrokenPipeError, ConnectionResetError: the process is gone
            self._broken = True
            raise BackendUnavailable("stream_closed", f"{what}: {type(exc).__name__}") from exc

    async def _read_stdout(self, stdout: asyncio.StreamReader) -> None:
        """Route every line the server writes until stdout ends; then fail what is in flight."""
        failure = BackendUnavailable("stream_closed", "the server closed its stdout (exited)")
        try:
            while True:
                try:
                    line = await stdout.readline()
                except ValueError:  # asyncio's LimitOverrunError, as readline reports it
                    limit = self._limits.max_message_bytes
                    raise BackendUnavailable("malformed_response", f"a line over {limit} bytes") from None
                if not line:
                    break
                if line.isspace():  # (the same test as strip(), without copying a long line)
                    continue
                try:
                    messages = await parse_messages(line)
                except ValueError:  # not JSON, or not JSON-RPC: a banner or a debug print
                    self._noise.line(line)
                    continue
                size = message_size(line, len(messages))
                try:
                    for message in messages:
                        await self._route(message, size)
                except ValueError as exc:  # a JSON-RPC message that cannot be routed
                    raise BackendUnavailable("malformed_response", f"stdout: {exc}") from exc
        except asyncio.CancelledError:
            failure = BackendUnavailable("stream_closed", "the session was closed")
            raise
        except BackendUnavailable as exc:
            failure = exc
        except Exception as exc:  # deny-on-error: whatever broke the stream, the session is over
            failure = BackendUnavailable("transport_error", f"stdout: {type(exc).__name__}")
        finally:
            self._fail_inflight(failure, "stdio")

    async def _read_stderr(self, stderr: asyncio.StreamReader) -> None:
        """Keep the last ``STDERR_TAIL_BYTES`` of stderr (and never let a full pipe block the server)."""
        with contextlib.suppress(OSError, ValueError):
            while chunk := await stderr.read(4096):
                self._stderr_tail += chunk
                del self._stderr_tail[:-STDERR_TAIL_BYTES]
