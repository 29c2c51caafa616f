"""Tasks (``io.modelcontextprotocol/tasks``): resident memory per retained and per running task at
10,000 tasks, and ``tasks/get`` latency on the owner replica and through a forward from another.

Two gateways (subprocesses, replicas ``a`` and ``b``: the same keys, each advertising its own
address) front :mod:`bench.light_server` on a route whose tools become tasks at once (``mode:
always``). Replica ``a`` makes every task; its RSS is read from ``/proc/<pid>/status`` after 100
warm-up tasks (first-use allocations, imports), then:

1. retained results: N calls of ``done`` (a short result, at once): each answer is a
   ``CreateTaskResult``, and the task is ``completed`` a moment later and kept (``tasks.retention``
   and ``tasks.ttl`` are far longer than the run). Per retained result is the growth over the
   baseline divided by N.
2. running tasks: N calls of ``work`` (the backend stays silent until the gateway goes away): each
   task keeps its backend session and connection leased. Per running task is the growth over step 1
   divided by N.
3. ``tasks/get`` latency, c=1, samples interleaved: on ``a`` for a task ``a`` owns (a running one
   and a completed one), and the same requests sent to ``b``, which forwards them to ``a``. A
   replica that does not forward answers -32602 (not found): then the forward figures are left out
   and the report says so.

``limits.max_tasks`` and ``limits.max_tasks_per_principal`` are raised above 2N (every caller here
is anonymous, and anonymous callers share one budget); the route's ``max_sessions`` above N.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import (
    HEADERS,
    MODERN,
    TIMEOUT,
    Processes,
    free_port,
    gateway_config,
    last_message,
    rss_kib,
    summary,
    wait_http,
)
from bench.light_server import DONE_TEXT

CONCURRENCY = 64
EXTENSION = "io.modelcontextprotocol/tasks"
META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}},
}


class TaskClient:
    """A raw 2026-07-28 client that declares the tasks extension on every request."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url, self.ids = http, url, 0

    async def _post(self, method: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": {**params, "_meta": META}}
        headers = {**HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": method, "Mcp-Name": name}
        async with self.http.post(self.url, json=body, headers=headers, timeout=TIMEOUT) as resp:
            raw = await resp.read()
            try:
                message = last_message(raw, resp.content_type)
            except ValueError as exc:
                raise RuntimeError(f"{self.url} answered HTTP {resp.status}: {raw[:300]!r}") from exc
            if resp.status != 200 and "error" not in message:
                raise RuntimeError(f"{self.url} answered HTTP {resp.status}: {message}")
            return message

    async def create(self, tool: str) -> dict[str, Any]:
        """``tools/call tool``; its ``CreateTaskResult``."""
        message = await self._post("tools/call", tool, {"name": tool, "arguments": {}})
        result = message.get("result")
        if not isinstance(result, dict) or result.get("resultType") != "task":
            raise RuntimeError(f"{self.url}: {tool} did not become a task: {message}")
        return result

    async def get(self, task_id: str) -> dict[str, Any]:
        """``tasks/get``: the JSON-RPC message (a result or an error)."""
        return await self._post("tasks/get", task_id, {"taskId": task_id})


async def _create(client: TaskClient, tool: str, count: int) -> list[str]:
    """``count`` tasks of ``tool``, ``CONCURRENCY`` calls at a time; their ids."""
    ids: list[str] = []
    queue = iter(range(count))

    async def worker() -> None:
        for _ in queue:
            ids.append((await client.create(tool))["taskId"])

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return ids


async def _status(client: TaskClient, task_id: str) -> str:
    message = await client.get(task_id)
    if "result" not in message:
        raise RuntimeError(f"tasks/get on the owner failed: {message}")
    status: str = message["result"]["status"]
    return status


async def _all_completed(client: TaskClient, ids: list[str], deadline: float = 120.0) -> None:
    """Until every task of ``ids`` is ``completed``, ``CONCURRENCY`` polls at a time."""
    end = time.monotonic() + deadline
    queue = iter(ids)

    async def worker() -> None:
        for task_id in queue:
            while (status := await _status(client, task_id)) != "completed":
                if status != "working" or time.monotonic() > end:
                    raise RuntimeError(f"task {task_id[:16]}… is {status}, not completed")
                await asyncio.sleep(0.05)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


async def _settled_rss(pid: int) -> int:
    await asyncio.sleep(1.0)  # let closed connections and finished tasks be collected
    return rss_kib(pid)


async def _latency(owner: TaskClient, other: TaskClient, tasks: dict[str, str], runs: int) -> dict[str, Any]:
    """``tasks/get`` of each task of ``tasks`` (status -> id) on the owner and through the other
    replica: every run samples each (status, path) pair once, in that order, so that no figure gets
    a quieter stretch of the machine than another."""
    forwarded = {status: await other.get(task_id) for status, task_id in tasks.items()}
    paths = [("owner", owner), ("forward", other)]
    samples: dict[tuple[str, str], list[float]] = {(s, p): [] for s in tasks for p, _ in paths}
    errors = dict.fromkeys(samples, 0)
    for _ in range(runs):
        for status, task_id in tasks.items():
            for path, client in paths:
                if path == "forward" and "result" not in forwarded[status]:
                    continue
                started = time.perf_counter()
                message = await client.get(task_id)
                elapsed = (time.perf_counter() - started) * 1000
                if "result" in message:
                    samples[status, path].append(elapsed)
                else:
                    errors[status, path] += 1  # counted, and left out of the figures
    out: dict[str, Any] = {}
    for status in tasks:
        figures: dict[str, Any] = {}
        for path, _ in paths:
            got = samples[status, path]
            if got:
                figures[path] = {**summary(got), "errors": errors[status, path]}
            elif path == "owner":
                raise RuntimeError(f"tasks/get ({status}) on the owner failed {errors[status, path]} times")
            else:
                figures[path] = None
                answer = forwarded[status].get("error")
                figures["forward_unavailable"] = f"the other replica answered {answer} to the first tasks/get"
        out[status] = figures
    return out


def _replica_config(port: int, replica: str, backend_port: int, top: int) -> str:
    route = (
        f"{{name: tasks, path: /mcp, backend: {{url: 'http://127.0.0.1:{backend_port}/mcp', max_sessions: {top}}}, "
        "tasks: {enabled: true, default: {mode: always}, ttl: 7200, retention: 7200}}"
    )
    extra = (
        f"replica_id: {replica}\n"
        f"replicas: {{advertise_url: 'http://127.0.0.1:{port}'}}\n"
        f"limits: {{max_tasks: {2 * top}, max_tasks_per_principal: {2 * top}}}\n"
    )
    return gateway_config(port, [route], extra)


async def measure(count: int, runs: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    backend_port, port_a, port_b = free_port(), free_port(), free_port()
    top = count + 200
    procs = Processes()
    configs: list[str] = []
    for port, replica in ((port_a, "a"), (port_b, "b")):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as cfg:
            cfg.write(_replica_config(port, replica, backend_port, top))
        configs.append(cfg.name)
    procs.start([sys.executable, "-m", "bench.light_server", "--port", str(backend_port)])
    gateway = procs.start([sys.executable, "-m", "gateway", "serve", "--config", configs[0]], env, log=True)
    procs.start([sys.executable, "-m", "gateway", "serve", "--config", configs[1]], env, log=True)
    out: dict[str, Any] = {
        "note": "two gateway replicas and the light backend on one shared 2-core VM with other work running: "
        "latencies are noisy, p99 most of all",
        "tasks": count,
        "result_text_bytes": len(DONE_TEXT),
        "limits": {"max_tasks": 2 * top, "max_tasks_per_principal": 2 * top, "max_sessions": top},
    }
    try:
        url_a, url_b = f"http://127.0.0.1:{port_a}/mcp", f"http://127.0.0.1:{port_b}/mcp"
        for url in (url_a, url_b, f"http://127.0.0.1:{backend_port}/mcp"):
            await wait_http(url)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as http:
            owner, other = TaskClient(http, url_a), TaskClient(http, url_b)
            warm = await _create(owner, "done", 100)  # warm-up: first-use allocations
            await _all_completed(owner, warm)
            base = await _settled_rss(gateway.pid)
            out["baseline_rss_kib"] = base

            started = time.perf_counter()
            done = await _create(owner, "done", count)
            await _all_completed(owner, done)
            retained_rss = await _settled_rss(gateway.pid)
            per_retained = (retained_rss - base) / count
            out["retained"] = {
                "count": count,
                "rss_kib": retained_rss,
                "kib_per_task": round(per_retained, 2),
                "seconds": round(time.perf_counter() - started, 1),
            }
            print(f"  {count:>6} retained results: RSS {retained_rss} KiB, {per_retained:.2f} KiB/task")

            started = time.perf_counter()
            running = await _create(owner, "work", count)
            running_rss = await _settled_rss(gateway.pid)
            per_running = (running_rss - retained_rss) / count
            out["running"] = {
                "count": count,
                "rss_kib": running_rss,
                "kib_per_task": round(per_running, 2),
                "seconds": round(time.perf_counter() - started, 1),
            }
            print(f"  {count:>6} running tasks: RSS {running_rss} KiB, {per_running:.2f} KiB/task")
            if await _status(owner, running[-1]) != "working":
                raise RuntimeError("a running task is no longer working")

            out["get_latency"] = {
                "runs": runs,
                "tasks_kept_by_owner": 2 * count + len(warm),
            }
            picked = {"working": running[len(running) // 2], "completed": done[len(done) // 2]}
            out["get_latency"].update(await _latency(owner, other, picked, runs))
            for status, figures in out["get_latency"].items():
                if not isinstance(figures, dict):
                    continue
                forward = figures["forward"]
                via = (
                    f"forward {forward['median_ms']} / {forward['p99_ms']} ms" if forward else "forward: not available"
                )
                owner_ms = figures["owner"]
                print(f"  tasks/get ({status}): owner {owner_ms['median_ms']} / {owner_ms['p99_ms']} ms, {via}")
    finally:
        procs.stop()
        for name in configs:
            Path(name).unlink()
    return out
