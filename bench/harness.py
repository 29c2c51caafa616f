"""What every benchmark part shares: ports, processes, bounded waits, statistics, process CPU and
memory, and the two raw HTTP clients (a handshake-era one for direct and hop, a 2026-07-28 one for
the gateway and the native server). No SDK code runs on the client side: only wire bytes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
MODERN = "2026-07-28"
LEGACY_VERSION = "2025-06-18"
CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
STATE_KEY = "bench-key-0123456789abcdef0123456789abcdef"
TIMEOUT = aiohttp.ClientTimeout(total=120)
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def legacy_python() -> str:
    return os.environ.get("MRTR_LEGACY_PYTHON", str(ROOT / ".venv-legacy/bin/python"))


@dataclass
class Processes:
    """Every child the run started, stopped in reverse order however the run ends."""

    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(
        self, argv: list[str], env: dict[str, str] | None = None, *, log: bool = False
    ) -> subprocess.Popen[bytes]:
        """Start a child; its output is discarded unless ``log`` and ``BENCH_GATEWAY_LOG`` is set.
        ``env`` with ``BENCH_GATEWAY_SRC`` runs it from there, so that checkout's gateway is imported."""
        env = env or dict(os.environ)
        sink = None if log and os.environ.get("BENCH_GATEWAY_LOG") else subprocess.DEVNULL
        cwd = env.get("BENCH_GATEWAY_SRC", str(ROOT))
        proc = subprocess.Popen(argv, cwd=cwd, stdout=sink, stderr=sink, env=env)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.procs.clear()


async def wait_http(url: str, deadline: float = 60) -> None:
    """Until something answers HTTP at ``url``'s host (any status), at most ``deadline`` seconds."""
    end = time.monotonic() + deadline
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < end:
            try:
                async with http.get(url.rsplit("/", 1)[0] + "/healthz-probe"):
                    return
            except aiohttp.ClientError:
                await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not come up within {deadline}s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def summary(samples: list[float]) -> dict[str, float]:
    """Median, p90, p99 and mean of samples in milliseconds."""
    ordered = sorted(samples)
    n = len(ordered)
    return {
        "runs": n,
        "median_ms": round(statistics.median(ordered), 3),
        "p90_ms": round(ordered[max(int(n * 0.9) - 1, 0)], 3),
        "p99_ms": round(ordered[max(int(n * 0.99) - 1, 0)], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


def last_message(raw: bytes, content_type: str) -> dict[str, Any]:
    """The JSON-RPC answer of a POST: a JSON body, or the last ``data:`` line of an SSE body."""
    if content_type == "text/event-stream":
        data = [line[5:] for line in raw.split(b"\n") if line.startswith(b"data:")]
        message: dict[str, Any] = json.loads(data[-1])
        return message
    decoded: dict[str, Any] = json.loads(raw)
    return decoded


class Modern:
    """A raw 2026-07-28 client (gateway and native server)."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url, self.ids = http, url, 0

    def body(self, name: str, arguments: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
        self.ids += 1
        params = {
            "name": name,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": CAPS,
            },
            **(extra or {}),
        }
        return {"jsonrpc": "2.0", "id": self.ids, "method": "tools/call", "params": params}

    @staticmethod
    def headers(name: str) -> dict[str, str]:
        return {**HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}

    async def post(self, body: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        """(HTTP status, JSON-RPC message or None when the body is not one)."""
        name = body["params"]["name"]
        async with self.http.post(self.url, json=body, headers=self.headers(name), timeout=TIMEOUT) as resp:
            raw = await resp.read()
            if resp.status != 200:
                return resp.status, None
            return resp.status, last_message(raw, resp.content_type)

    async def call(self, name: str, arguments: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
        status, message = await self.post(self.body(name, arguments, extra))
        if status != 200 or message is None or "result" not in message:
            raise RuntimeError(f"{self.url} answered {status}: {message}")
        result: dict[str, Any] = message["result"]
        return result

    async def round_trip(self, tool: str = "ask_city", expect: str = "city=Paris", rounds: int = 1) -> None:
        """An interactive flow: the call, then one retry per InputRequiredResult, each carrying the
        answers to that round's questions (:func:`answer`); ``rounds`` input rounds, then ``expect``."""
        extra: dict[str, Any] | None = None
        for _ in range(rounds):
            asked = await self.call(tool, {}, extra)
            assert asked["resultType"] == "input_required", asked
            answers = {k: answer(r) for k, r in asked["inputRequests"].items()}
            extra = {"inputResponses": answers, "requestState": asked["requestState"]}
        done = await self.call(tool, {}, extra)
        assert done.get("resultType", "complete") == "complete", done
        assert done["content"][0]["text"] == expect, done


class Legacy:
    """A raw handshake-era streamable HTTP client: one session, then ``tools/call`` POSTs whose SSE
    (or JSON) answer is read whole (tools that ask nothing)."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url, self.ids = http, url, 0
        self.session_headers: dict[str, str] = dict(HEADERS)

    async def open(self) -> Legacy:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY_VERSION,
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        }
        async with self.http.post(self.url, json=init, headers=HEADERS, timeout=TIMEOUT) as resp:
            await resp.read()
            session_id = resp.headers["Mcp-Session-Id"]
        self.session_headers = {**HEADERS, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": LEGACY_VERSION}
        notified = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with self.http.post(self.url, json=notified, headers=self.session_headers, timeout=TIMEOUT) as resp:
            await resp.read()
        return self

    def body(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        return {
            "jsonrpc": "2.0",
            "id": self.ids,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One ``tools/call``; the answer (JSON, or SSE read to its end so the connection is reused)."""
        body = self.body(name, arguments)
        async with self.http.post(self.url, json=body, headers=self.session_headers, timeout=TIMEOUT) as resp:
            raw = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{self.url} answered HTTP {resp.status}: {raw[:200]!r}")
            result: dict[str, Any] = last_message(raw, resp.content_type)["result"]
            return result

    async def round_trip(self, tool: str = "ask_city", expect: str = "city=Paris", rounds: int = 1) -> None:
        """The same flow spoken directly in the handshake era (an inline client): ``tools/call`` on
        the session, each of the server's ``elicitation/create`` requests on the call's SSE stream
        answered by POSTing the JSON-RPC response to the same session while that stream stays open,
        then the result on the stream. The backend sees what the gateway sends it (the call and one
        answer per question, less the gateway's fence pings); through the bare hop, one proxy hop per
        HTTP exchange. ``rounds`` questions are expected."""
        body = self.body(tool, {})
        asked = 0
        async with self.http.post(self.url, json=body, headers=self.session_headers, timeout=TIMEOUT) as resp:
            if resp.status != 200 or resp.content_type != "text/event-stream":
                raise RuntimeError(f"{self.url} answered HTTP {resp.status} {resp.content_type}")
            async for line in resp.content:
                if not line.startswith(b"data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("method") == "elicitation/create":
                    asked += 1
                    reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
                    async with self.http.post(
                        self.url, json=reply, headers=self.session_headers, timeout=TIMEOUT
                    ) as ack:
                        await ack.read()
                elif message.get("id") == body["id"]:
                    assert message["result"]["content"][0]["text"] == expect, message
                    assert asked == rounds, f"{asked} questions, {rounds} expected"
                    return
        raise RuntimeError(f"{self.url}: the call's stream ended without its result")


ANSWERS: dict[str, Any] = {"city": "Paris", "name": "alice", "color": "blue", "day": "friday", "time": "20:00"}
"""What the bench's clients answer for a form field, by name (fields not listed: their type's default)."""


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The accepting answer to a form ``elicitation/create`` (a 2026-07-28 input request or a
    handshake-era JSON-RPC request: both carry ``method`` and ``params``)."""
    assert request["method"] == "elicitation/create", request
    fields = request["params"].get("requestedSchema", {}).get("properties", {})
    defaults = {"integer": 2, "number": 2, "boolean": True}
    content = {k: ANSWERS.get(k, defaults.get(v.get("type"), "x")) for k, v in fields.items()}
    return {"action": "accept", "content": content}


def gateway_config(port: int, routes: list[str], extra: str = "") -> str:
    """A gateway YAML with the bench's state key, quiet logs and the given route lines."""
    return (
        f"listen: {{host: 127.0.0.1, port: {port}}}\n"
        f"state: {{keys: ['{STATE_KEY}']}}\n"
        "logging: {level: "
        + os.environ.get("BENCH_GATEWAY_LOG", "warning")
        + "}\n"
        + extra
        + "routes:\n"
        + "".join(f"  - {r}\n" for r in routes)
    )


def start_proxies(
    procs: Processes, hop_port: int, backend: str, config: str, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]:
    """Start the bare hop (to ``backend``) and the gateway (``config``); returns (hop, gateway)."""
    hop = procs.start([sys.executable, "-m", "bench.forward_hop", "--port", str(hop_port), "--target", backend])
    gateway = procs.start([sys.executable, "-m", "gateway", "serve", "--config", config], env, log=True)
    return hop, gateway
