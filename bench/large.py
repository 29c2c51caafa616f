"""Large results and the event loop: a 4 MiB ``blob`` result direct vs through the gateway, and the
slowest ``/healthz`` answer while the gateway carries it (a stalled loop shows there first: the
liveness probe would see the same).

``/healthz`` is asked back to back, 5 ms apart, by :mod:`bench.healthz_probe` in a process of its
own, only while a gateway call runs: the benchmark's own client parses the 4 MiB answer on its
event loop, and a probe sharing that loop would have waited for it too. Each run gives the slowest
probe answer during its gateway call; the report keeps the worst of all runs and their median.

The same probe also runs, in each run, for as long as the gateway call took while the gateway is
idle: its slowest answer is the machine's floor (a shared 2-core machine deschedules the probe or
the gateway now and then), against which the figure during the calls is to be read.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from typing import Any

from bench.harness import ROOT, Legacy, Modern, summary

SIZE = 4 * 1024 * 1024
PROBE_TIMEOUT = 120.0


class Probe:
    """The probe process: ``run`` before a gateway call, ``pause`` after; the answers in between."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, url: str) -> Probe:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.healthz_probe",
            url,
            cwd=ROOT,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        probe = cls(proc)
        await probe._until_paused()
        return probe

    async def _until_paused(self) -> list[float]:
        assert self.proc.stdout is not None
        latencies: list[float] = []
        async with asyncio.timeout(PROBE_TIMEOUT):
            while (line := await self.proc.stdout.readline()) != b"paused\n":
                if not line:
                    raise RuntimeError("the /healthz probe ended")
                latencies.append(float(line.split()[1]))
        return latencies

    def _send(self, command: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + b"\n")

    async def run(self) -> None:
        self._send(b"run")

    async def pause(self) -> list[float]:
        """Stop probing; the latencies (ms) measured since :meth:`run`."""
        self._send(b"pause")
        return await self._until_paused()

    async def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            async with asyncio.timeout(10):
                await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


async def large(direct: Legacy, gateway: Modern, healthz: str, runs: int) -> dict[str, Any]:
    direct_ms: list[float] = []
    gateway_ms: list[float] = []
    worst_per_run: list[float] = []
    idle_worst_per_run: list[float] = []
    probes = 0
    load = os.getloadavg()
    probe = await Probe.start(healthz)
    try:
        for _ in range(runs):
            started = time.perf_counter()
            result = await direct.call("blob", {"size": SIZE})
            direct_ms.append((time.perf_counter() - started) * 1000)
            assert len(result["content"][0]["text"]) == SIZE
            await probe.run()
            started = time.perf_counter()
            result = await gateway.call("blob", {"size": SIZE})
            gateway_ms.append((time.perf_counter() - started) * 1000)
            samples = await probe.pause()
            assert len(result["content"][0]["text"]) == SIZE
            probes += len(samples)
            worst_per_run.append(max(samples, default=0.0))
            await probe.run()
            await asyncio.sleep(gateway_ms[-1] / 1000)  # the same time, with the gateway idle
            idle_worst_per_run.append(max(await probe.pause(), default=0.0))
    finally:
        await probe.stop()
    d, g = statistics.median(direct_ms), statistics.median(gateway_ms)
    worst = max(worst_per_run)
    out = {
        "bytes": SIZE,
        "runs": runs,
        "direct_median_ms": round(d, 1),
        "gateway_median_ms": round(g, 1),
        "ratio": round(g / d, 2),
        "healthz_worst_ms": round(worst, 1),
        "healthz_worst_per_run_median_ms": round(statistics.median(worst_per_run), 1),
        "healthz_probes": probes,
        "healthz_worst_per_run_ms": sorted(round(w, 1) for w in worst_per_run),
        "healthz_idle_worst_ms": round(max(idle_worst_per_run), 1),
        "healthz_idle_worst_per_run_median_ms": round(statistics.median(idle_worst_per_run), 1),
        "direct": summary(direct_ms),
        "gateway": summary(gateway_ms),
        "loadavg_before": [round(x, 2) for x in load],
    }
    print(
        f"  4 MiB: direct {d:.1f} ms  gateway {g:.1f} ms  ratio {out['ratio']}  /healthz worst {worst:.1f} ms"
        f" (median of the runs' worst {out['healthz_worst_per_run_median_ms']} ms, {probes} probes;"
        f" gateway idle: worst {out['healthz_idle_worst_ms']} ms,"
        f" median {out['healthz_idle_worst_per_run_median_ms']} ms)"
    )
    return out
