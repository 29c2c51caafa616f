"""The cost of one stdio memory guard check: ``python -m bench.stdio_memory_check [--children 50]``.

Starts ``--children`` server-like process trees as the gateway does (each in a process group of its
own, each a Python process with a child of its own, as ``npx`` starts ``node``), registers them
with a :class:`~gateway.legacy.memory.StdioMemoryGuard` reading a cgroup v2 directory of its own,
and times :meth:`~gateway.legacy.memory.StdioMemoryGuard.check` ``--rounds`` times each way:

* ``cgroup_only``: no route sets ``backend.max_memory`` and the container is under
  ``stdio_memory_kill``: the check reads the three cgroup files;
* ``every_tree``: every route sets ``max_memory`` (far above what the processes use, so none is
  killed): the check also measures every process tree from ``/proc`` (what it does at
  ``stdio_memory_kill`` too).

Printed as one JSON object (milliseconds per check: median, p95, max). Every child is killed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gateway.config.model import RouteConfig
from gateway.legacy.memory import StdioMemoryGuard

SLEEP = "import time; time.sleep(600)"
CHILD = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {SLEEP!r}]); time.sleep(600)"


def route(name: str, max_memory: int | None) -> RouteConfig:
    backend = {"transport": "stdio", "command": ["server"], "max_memory": max_memory}
    return RouteConfig.model_validate({"name": name, "path": f"/{name}", "backend": backend})


def timed(guard: StdioMemoryGuard, rounds: int) -> dict[str, float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        guard.check()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {
        "median_ms": round(statistics.median(samples), 3),
        "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 3),
        "max_ms": round(samples[-1], 3),
    }


async def run(children: int, rounds: int) -> dict[str, object]:
    procs = []
    with tempfile.TemporaryDirectory() as cgroup:
        root = Path(cgroup)
        (root / "memory.max").write_text(f"{1 << 30}\n")
        (root / "memory.current").write_text(f"{300 << 20}\n")
        (root / "memory.stat").write_text("anon 300000000\nactive_file 0\ninactive_file 1000000\n")
        try:
            for _ in range(children):
                procs.append(await asyncio.create_subprocess_exec(sys.executable, "-c", CHILD, start_new_session=True))
            await asyncio.sleep(1.0)  # deliberate: each child starts its own child
            result: dict[str, object] = {"children": children, "rounds": rounds}
            for name, max_memory in (("cgroup_only", None), ("every_tree", 1 << 40)):
                guard = StdioMemoryGuard(high=0.85, kill=0.95, retry_after=5, root=root)
                watch = guard.route(route(name, max_memory))
                for proc in procs:
                    watch.started(proc)
                result[name] = timed(guard, rounds)
            return result
        finally:
            for proc in procs:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            await asyncio.gather(*(proc.wait() for proc in procs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.children, args.rounds))))


if __name__ == "__main__":
    main()
