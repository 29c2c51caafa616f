"""A stdio server's process, apart from the session it carries: its environment, its OOM score,
the logging of what it prints that is not JSON-RPC, and its stop.

:mod:`gateway.legacy.stdio` starts the process and speaks JSON-RPC with it; what it needs of the
process itself lives here. :class:`NoiseLog` logs the lines of stdout that are not JSON-RPC,
truncated and rate-limited. :func:`stop_process` closes stdin, then sends SIGTERM, then SIGKILL, to
the process group, waiting :data:`STOP_GRACE` between steps, and :func:`end_group` ends what is left
of the group once the process is reaped, then has the orphan guard
(:data:`~gateway.legacy.orphans.GUARD`) forget it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import time
from collections.abc import Mapping

import structlog

from gateway.legacy.orphans import GUARD

log = structlog.get_logger("gateway.legacy")

STOP_GRACE = 2.0
"""Seconds allowed after closing stdin, and again after SIGTERM, before the next step."""
INHERITED_ENV = ("PATH", "HOME", "LANG")
NOISE_EXCERPT_CHARS = 200
"""How much of a skipped stdout line is logged."""
NOISE_LINES_PER_WINDOW = 10
NOISE_WINDOW = 10.0
"""At most ``NOISE_LINES_PER_WINDOW`` skipped lines are logged per ``NOISE_WINDOW`` seconds."""


class NoiseLog:
    """Logs the non-JSON-RPC lines a stdio server prints, truncated and rate-limited.

    A chatty server must neither fill the gateway's logs nor hide what it says: the first lines
    of every window are logged (an excerpt), the rest counted and reported with the next one.
    """

    def __init__(self, program: str) -> None:
        self._program = program
        self._window_start = -NOISE_WINDOW
        self._logged = 0
        self._suppressed = 0

    def line(self, raw: bytes) -> None:
        now = time.monotonic()
        if now - self._window_start >= NOISE_WINDOW:
            self._window_start = now
            self._logged = 0
        if self._logged >= NOISE_LINES_PER_WINDOW:
            self._suppressed += 1
            return
        self._logged += 1
        excerpt = raw[: NOISE_EXCERPT_CHARS * 4].decode("utf-8", errors="replace").strip()[:NOISE_EXCERPT_CHARS]
        log.info(
            "backend_stdout_skipped",
            program=self._program,
            line=excerpt,
            bytes=len(raw),
            suppressed_before=self._suppressed,
        )
        self._suppressed = 0


def set_oom_score_adj(pid: int, value: int) -> None:
    """Set ``pid``'s OOM score adjustment (``backend.oom_score_adj``), right after it was started:
    children it forks later inherit it (``npx`` starts ``node`` after loading). Raising it needs no
    privilege; where the kernel refuses (a value below the gateway's own) or there is no ``/proc``,
    the server runs as it is, logged once per value and error."""
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as adj:
            adj.write(str(value))
    except OSError as exc:
        _oom_score_adj_refused(value, type(exc).__name__)


@functools.cache
def _oom_score_adj_refused(value: int, error: str) -> None:
    log.warning("oom_score_adj_refused", value=value, error=error)


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """A minimal environment: PATH, HOME and LANG from the gateway's, plus the route's ``env``."""
    env = {name: os.environ[name] for name in INHERITED_ENV if name in os.environ}
    env.update(extra)
    return env


async def stop_process(proc: asyncio.subprocess.Process) -> None:
    """Close stdin, then SIGTERM, then SIGKILL the process group, waiting between steps."""
    if proc.stdin is not None and not proc.stdin.is_closing():
        proc.stdin.close()
    for step in (None, signal.SIGTERM, signal.SIGKILL):
        if step is not None and proc.returncode is None:
            try:
                os.killpg(proc.pid, step)
            except (ProcessLookupError, PermissionError):
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(step)
        try:
            async with asyncio.timeout(STOP_GRACE if step is not signal.SIGKILL else 3 * STOP_GRACE):
                await proc.wait()
            return
        except TimeoutError:
            continue
    log.warning("backend process did not die after SIGKILL", pid=proc.pid)


async def end_group(pgid: int) -> None:
    """What is left of a reaped server's process group (its own children): SIGTERM, then SIGKILL
    after :data:`STOP_GRACE`; then the orphan guard forgets the group."""
    try:
        for step in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pgid, step)
            except (ProcessLookupError, PermissionError):
                return  # nothing is left of it
            for _ in range(int(STOP_GRACE / 0.05)):
                await asyncio.sleep(0.05)
                try:
                    os.killpg(pgid, 0)
                except (ProcessLookupError, PermissionError):
                    return
        log.warning("backend process group did not die after SIGKILL", pgid=pgid)
    finally:
        GUARD.gone(pgid)
