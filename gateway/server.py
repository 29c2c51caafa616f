"""Serving the app: HTTP parser bounds and a cap on concurrent client connections.

Bounds a client controls before any handler runs (issue 8 item 4):

* header size and count: aiohttp's parser refuses a longer header line or field, or more header
  lines, with 400 before the request reaches the app (``listen.max_header_bytes``,
  ``listen.max_headers``);
* concurrent connections (``listen.max_connections``, by default derived from the open-file
  limit): at the cap an idle keep-alive connection is closed to admit a new one, else the new
  connection's request head is read and answered ``503`` with ``Retry-After`` and a clean close,
  so a flood of connections that never finish their request cannot take every file descriptor (a
  slow header has no timeout in aiohttp: the cap is what keeps the gateway serving) and a client
  refused at the cap reads a 503, never a reset (:mod:`gateway.connections`).

:func:`listen` binds the socket with :class:`~gateway.connections.ConnectionLimiter` around the
runner's protocol factory (``runner.server`` and ``loop.create_server``); :func:`run` is the
process's whole life, signals, drain and graceful shutdown included (what ``web.run_app`` does,
plus the cap, the drain and an optional port of its own for ``/metrics``).

Stopping, in order: the first SIGTERM (or SIGINT) begins the drain (:mod:`gateway.drain`): the
listener stays open, since the retries of held calls must still reach this replica, while /readyz
says 503 and new calls are refused. When nothing is held or in flight, or after
``listen.drain_timeout`` (a second signal cuts it short), the listener closes and the runner shuts
the app down in its documented order (:mod:`gateway.app`), all of it bounded by
:data:`SHUTDOWN_TIMEOUT`. So the process exits within ``drain_timeout`` + :data:`SHUTDOWN_TIMEOUT`,
whatever a backend does (the Helm chart's grace period is computed from that sum).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import structlog
from aiohttp import web

from gateway import keys, ops
from gateway.config.model import ListenConfig
from gateway.connections import REUSE_IDLE_AFTER, ConnectionLimiter, default_max_connections
from gateway.legacy.orphans import GUARD

log = structlog.get_logger("gateway.server")

SHUTDOWN_TIMEOUT: Final = 10.0
"""Longest the shutdown after the drain may take (requests still running, hold expiry, backend
sessions closed); past it the process exits anyway (log ``shutdown_timed_out``)."""
HANDLER_GRACE: Final = 5.0
"""Of that, how long requests still running after the drain get before they are cancelled."""


def handler_options(listen: ListenConfig) -> dict[str, Any]:
    """aiohttp request-handler options (``web.AppRunner(app, **handler_options(...))``)."""
    return {
        "max_line_size": listen.max_header_bytes,
        "max_field_size": listen.max_header_bytes,
        "max_headers": listen.max_headers,
    }


async def listen(
    runner: web.AppRunner,
    host: str,
    port: int,
    max_connections: int | None,
    on_refuse: Callable[[], None] | None = None,
    reuse_idle_after: float = REUSE_IDLE_AFTER,
) -> asyncio.AbstractServer:
    """Bind ``host:port`` for an already set-up ``runner``, capped at ``max_connections`` (None:
    :func:`~gateway.connections.default_max_connections`)."""
    assert runner.server is not None, "call runner.setup() first"
    loop = asyncio.get_running_loop()
    limit = default_max_connections() if max_connections is None else max_connections
    limiter = ConnectionLimiter(runner.server, limit, runner.app[keys.CONNECTIONS], on_refuse, reuse_idle_after)
    return await loop.create_server(limiter, host, port, reuse_address=True)


class BindFailed(OSError):
    """A port could not be bound; ``address`` says which (the client port or the metrics port)."""

    def __init__(self, address: str, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.address = address


class LoopUnavailable(RuntimeError):
    """``listen.event_loop: uvloop`` without uvloop installed."""


@dataclass(frozen=True)
class EventLoop:
    """The event loop the process serves on (``listen.event_loop``)."""

    name: str
    new: Callable[[], asyncio.AbstractEventLoop]


def event_loop(choice: str) -> EventLoop:
    """The loop ``choice`` (``listen.event_loop``) asks for: ``uvloop``, ``asyncio``, or ``auto``
    (uvloop when the ``uvloop`` extra is installed, else asyncio); :class:`LoopUnavailable` when it
    is ``uvloop`` and that is not installed.

    uvloop measured 4-9 % less CPU per pass-through call than asyncio's loop (two alternated series
    of bench runs on a shared 2-core machine, 3 and 5 runs a side; at one client 1.03 -> 0.93 and
    1.08 -> 1.03 ms, at 64 clients 0.90 -> 0.89 and 0.98 -> 0.91 ms), latency within the spread.
    """
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise LoopUnavailable("uvloop is not installed: pip install 'mrtr-gateway[uvloop]'") from None
        else:
            return EventLoop("uvloop", uvloop.new_event_loop)
    return EventLoop("asyncio", asyncio.new_event_loop)


def run(app: web.Application, host: str, port: int, listen_config: ListenConfig) -> None:
    """Serve ``app`` until SIGINT or SIGTERM, drain, then shut down in ``app``'s documented order."""
    loop = event_loop(listen_config.event_loop)
    with asyncio.Runner(loop_factory=loop.new) as runner:
        runner.run(_serve(app, host, port, listen_config))


async def _serve(app: web.Application, host: str, port: int, listen_config: ListenConfig) -> None:
    # A client that closes its connection cancels its request: the call driver then tells the
    # legacy backend with notifications/cancelled (legacy servers ignore disconnects).
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=HANDLER_GRACE, handler_cancellation=True)
    await runner.setup()
    drain = app[keys.DRAIN]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        drain.begin()  # the first signal drains, a second one cuts the drain short
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)
    metrics_runner: web.AppRunner | None = None
    try:
        try:
            max_connections = listen_config.max_connections or default_max_connections()
            server = await listen(runner, host, port, max_connections, _Refusals(app))
        except OSError as exc:
            raise BindFailed(f"{host}:{port}", exc) from exc
        running = type(loop).__module__.partition(".")[0]  # the loop serving, as the log says it: uvloop or asyncio
        log.info("listening", url=f"http://{host}:{port}", max_connections=max_connections, event_loop=running)
        try:
            if listen_config.metrics_port is not None:
                metrics_runner = await serve_metrics(app, host, listen_config.metrics_port)
            await stop.wait()
            await drain.wait()  # retries of held calls still come in through the open listener
        finally:
            server.close()  # stop accepting; the rest is the runner's (see gateway.app)
    finally:
        try:
            async with asyncio.timeout(SHUTDOWN_TIMEOUT):
                await runner.cleanup()
        except TimeoutError:  # a backend that never answers must not keep the process (or the pod) up
            log.warning("shutdown_timed_out", seconds=SHUTDOWN_TIMEOUT)
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        GUARD.close()  # every stdio server was stopped with the runner


async def serve_metrics(app: web.Application, host: str, port: int) -> web.AppRunner:
    """``GET /metrics`` of ``app``'s registry on a port of its own (``listen.metrics_port``)."""
    metrics_app = web.Application()
    metrics_app.router.add_get("/metrics", ops.metrics_handler(app[keys.METRICS].registry))
    runner = web.AppRunner(metrics_app, access_log=None, shutdown_timeout=1)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, reuse_address=True).start()
    except OSError as exc:
        await runner.cleanup()
        raise BindFailed(f"{host}:{port}", exc) from exc
    log.info("metrics_listening", url=f"http://{host}:{port}/metrics")
    return runner


class _Refusals:
    """Counts connections refused at the cap; logs at most one line per :data:`LOG_EVERY` seconds
    (a connection flood must not become a log flood)."""

    LOG_EVERY: Final = 10.0

    def __init__(self, app: web.Application) -> None:
        self._counter = app[keys.METRICS].rejections.labels("max_connections")
        self._next_log = 0.0
        self._since_log = 0

    def __call__(self) -> None:
        self._counter.inc()
        self._since_log += 1
        now = time.monotonic()
        if now >= self._next_log:
            log.warning("connections_refused", reason="max_connections", count=self._since_log)
            self._next_log, self._since_log = now + self.LOG_EVERY, 0
