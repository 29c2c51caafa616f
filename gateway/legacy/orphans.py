"""Stdio server processes die with the gateway, however the gateway dies.

Each stdio server runs in a process group of its own (``start_new_session``), so a signal meant
for the gateway's terminal or unit does not reach it half-way, and ``close()`` can stop the
server's own children with it (``npx`` → ``node``). The other side of that: when the gateway is
killed outright (SIGKILL, the OOM killer, a crash), nothing ends those groups, and a server that
ignores the end of its stdin (``server-everything`` does, once initialized) lives on, reparented.

The guard is one small process per gateway (this module, run as ``python -m
gateway.legacy.orphans``), started with the first stdio server. The gateway writes ``+PGID`` to
its stdin when a server's group starts and ``-PGID`` once the group is gone. When its stdin reaches
end of file - the gateway closed it, or the kernel did because the gateway died, whatever the
signal - it sends SIGKILL to every group still registered and exits. Why a pipe and not
``prctl(PR_SET_PDEATHSIG)`` in each child: the death signal must be set between fork and exec
(``preexec_fn``, unsafe in a process with threads, and the gateway has the resolver's and the
default executor's), it is Linux only, it reaches the direct child only (not ``npx``'s ``node``),
and it fires when the forking *thread* exits, not the process. The pipe covers whole groups, on
every POSIX system, whichever thread started the server.

Limits: a group started in the instant between ``fork`` and its ``+PGID`` line is not covered (the
gateway dies within microseconds of starting it); the guard runs in a session of its own (a
Ctrl-C aimed at the gateway's terminal does not end it before the gateway's own orderly close),
so ``kill -9 -<gateway's group>`` does not reach it either, by design. If the guard itself cannot
be started, servers still run, a warning is logged once, and they are stopped only by ``close()``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys


class OrphanGuard:
    """The gateway's side: starts the guard process once, registers and forgets process groups."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid = 0
        self._failed = False

    def _ensure(self) -> int | None:
        """The guard's stdin, started on first use (again in a forked child of the gateway)."""
        if self._proc is not None and self._pid == os.getpid() and self._proc.poll() is None:
            assert self._proc.stdin is not None
            return self._proc.stdin.fileno()
        if self._failed:
            return None
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "gateway.legacy.orphans"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            self._failed = True
            import structlog

            structlog.get_logger("gateway.legacy").warning("orphan_guard_unavailable", error=type(exc).__name__)
            return None
        self._pid = os.getpid()
        assert self._proc.stdin is not None
        os.set_blocking(self._proc.stdin.fileno(), False)
        return self._proc.stdin.fileno()

    def _send(self, line: str) -> None:
        fd = self._ensure()
        if fd is None:
            return
        with contextlib.suppress(OSError):  # a full pipe (the guard stalled) or a dead guard: best effort
            os.write(fd, line.encode() + b"\n")

    def started(self, pgid: int) -> None:
        self._send(f"+{pgid}")

    def gone(self, pgid: int) -> None:
        self._send(f"-{pgid}")

    def close(self, timeout: float = 5.0) -> None:
        """At the gateway's orderly end, once every stdio server is stopped: end the guard (its stdin
        closed, it kills what is still registered) and reap it. Started again if used after this."""
        proc, self._proc = self._proc, None
        if proc is None or self._pid != os.getpid():
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


GUARD = OrphanGuard()
"""One per gateway process: every stdio session registers its process group here."""


def _kill_all(groups: set[int]) -> None:
    for pgid in groups:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)


def main() -> None:
    """The guard: remember ``+PGID`` / ``-PGID`` lines; at end of stdin, SIGKILL what is left."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the end of stdin ends it
    signal.signal(signal.SIGTERM, lambda *_: None)
    groups: set[int] = set()
    stdin = sys.stdin.buffer
    try:
        for raw in stdin:
            line = raw.strip()
            with contextlib.suppress(ValueError):
                pgid = int(line[1:])
                if pgid > 1 and line[:1] == b"+":
                    groups.add(pgid)
                elif line[:1] == b"-":
                    groups.discard(pgid)
    finally:
        _kill_all(groups)


if __name__ == "__main__":
    main()
