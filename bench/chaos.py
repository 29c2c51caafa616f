"""Chaos: nothing lost when a replica dies (issue 26).

N real gateway replicas (``python -m gateway serve``, each on its own port with its own
``replica_id`` and ``replicas.advertise_url``, the same ``state.keys``, JSON logs to one file per
process start) front ONE legacy server (the project's mcp 1.30.0 FastMCP peer,
``tests/peers/legacy_fastmcp.py``, streamable HTTP) on two routes: ``/replay``
(``holds.on_lost: replay``) and ``/error`` (``holds.on_lost: error``). Clients run the peer's
two-round tool ``ask_two`` (the second question quotes the first answer) over and over; every
request goes to a replica picked at random (a balancer with no affinity). During the load one
replica is killed (SIGKILL) and restarted a few seconds later on the same port under the same
``replica_id``, and another is drained (SIGTERM) and restarted once it has exited. Each signal
comes at its time or, within a few seconds of it, at the first moment when several retries are in
flight to or through that replica (the client knows which replica made each call), so that every
run meets the cases that matter: a retry forwarded to an owner as it dies, a retry being forwarded
by a replica as it dies.

A request that fails at the transport (refused, reset, disconnected, timed out, cut short) or with
HTTP 503 is sent again, byte for byte (same body, same JSON-RPC id, same headers), to a replica not
yet tried for it, after 50-100 ms (a 503's ``Retry-After``, up to 1 s), at most
:attr:`Settings.max_sends` times, cycling once every replica was tried. Any other error answer ends
the flow as **lost** (its ``data.reason``, ``data.cause``, HTTP status, the replica that answered,
the round). A final text other than the one the answers imply is **wrong**. The replicas' request
lines (``hold`` digest, ``round``, ``outcome``) tell which process held each round of a flow (the
owner): nothing is decoded.

The verdict (:func:`problems`): on ``/replay`` nothing wrong and nothing lost; on ``/error`` nothing
wrong, and every lost flow's hold was on the killed process, lost with the documented error
(``hold_lost``, cause ``owner_failed``, ``owner_unreachable`` or ``owner_gone``).

Shared by ``tests/chaos/test_chaos.py`` (3 replicas, 16 clients, 30 s) and the benchmark::

    .venv/bin/python -m bench.chaos [--clients 100] [--seconds 40] [--json PATH] [--seed N] [--gateway-src DIR]
    .venv/bin/python -m bench --only chaos      # the same, from the suite (--quick: 30 clients, 20 s)

which writes ``bench/results/issue26-chaos-<n>.json`` (the next free ``n``). Everything binds
127.0.0.1; every wait is bounded; every process started is killed however the run ends.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import itertools
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import aiohttp

ROOT: Final = Path(__file__).resolve().parents[1]
MODERN: Final = "2026-07-28"
TOOL: Final = "ask_two"
CAPS: Final[dict[str, Any]] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
"""What tests/harness.py's BareClient declares (ALL_CAPS)."""
ROUTES: Final = ("replay", "error")
"""Route names; each is served at ``/<name>`` with ``holds.on_lost: <name>``."""
HOLD_LOST: Final = "hold_lost"
DOCUMENTED_CAUSES: Final = frozenset({"owner_failed", "owner_unreachable", "owner_gone"})
"""The ``data.cause`` of a ``hold_lost`` the README documents for an owner that died."""
STATE_KEY: Final = "chaos-key-0123456789abcdef0123456789abcdef"
MAX_STEPS: Final = 6
"""Most requests one flow makes (ask_two needs 3: the call and two retries)."""
SHUTDOWN_TIMEOUT: Final = 10.0
"""gateway.server.SHUTDOWN_TIMEOUT: a drained process exits within drain_timeout + this."""
BOUND: Final = 30.0
"""Seconds any one start, readiness or exit is waited for."""

now = time.time  # wall clock: compared with the replicas' log timestamps


@dataclass(frozen=True)
class Settings:
    replicas: int = 3
    clients: int = 16
    seconds: float = 30.0
    """Load: flows are started until then (seconds from the load's start); started ones finish."""
    kill_at: float = 7.0
    kill_down: float = 3.0
    """Seconds between the SIGKILL and the restart."""
    drain_at: float = 17.0
    drain_timeout: float = 3.0
    kill_replica: int = 1
    drain_replica: int = 2
    think: tuple[float, float] = (0.0, 0.1)
    """Seconds a client waits before answering a round (uniform)."""
    max_sends: int = 6
    send_timeout: float = 15.0
    backend_timeout: float = 10.0
    busy_min: int = 2
    """A signal waits (at most ``busy_wait`` s) until this many retries of each route in flight cross
    its replica on a hop (:meth:`Client.busy`)."""
    busy_wait: float = 3.0
    grace: float = 40.0
    """Seconds flows started before the end of the load have to finish (then they are unfinished)."""
    state_key: str = STATE_KEY
    log_dir: Path = Path(tempfile.gettempdir()) / "mrtr-chaos"
    """Where each replica's config and one log file per process start go (kept for the post-mortem)."""
    gateway_src: Path | None = None
    """Run the gateway package found here (a checkout of another commit) instead of this tree's."""
    seed: int | None = None


# -- the replicas ------------------------------------------------------------------------------


@dataclass
class Boot:
    """One process start of a replica."""

    replica: str
    number: int
    log: Path
    started: float
    pid: int = 0
    ready: float | None = None
    ended: float | None = None
    gone: float | None = None
    """Since when the process serves nothing: the SIGKILL's time, or its exit's."""
    exit_code: int | None = None
    fate: str = "running"
    """``running``, then ``killed`` (SIGKILL), ``drained`` (SIGTERM, exited by itself; ``drain_timed_out``
    if its drain ended at ``drain_timeout`` with calls still held) or ``stopped``."""
    drain: dict[str, Any] = field(default_factory=dict)
    """What its ``drain_ended`` line said: ``drained`` (nothing left held or in flight), ``holds``,
    ``in_flight`` (left when it ended)."""

    @property
    def label(self) -> str:
        return f"{self.replica}#{self.number}"


class Replica:
    """A gateway replica: one port, one replica_id, one process at a time (restarts keep both)."""

    def __init__(self, index: int, port: int, config: Path, settings: Settings) -> None:
        self.index = index
        self.port = port
        self.id = f"replica-{index}"
        self.config = config
        self.settings = settings
        self.boots: list[Boot] = []
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def current(self) -> Boot:
        return self.boots[-1]

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def start(self) -> Boot:
        boot = Boot(self.id, len(self.boots), self.settings.log_dir / f"{self.id}.boot{len(self.boots)}.log", now())
        src = self.settings.gateway_src
        env = {k: v for k, v in os.environ.items() if not k.startswith("MRTR_GATEWAY_")}
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in ([src] if src else []) + [ROOT])
        with boot.log.open("wb") as sink:  # the child keeps its own descriptor
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "gateway",
                "serve",
                "--config",
                str(self.config),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=sink,
                cwd=str(src or ROOT),
                env=env,
            )
        boot.pid = self._proc.pid
        self.boots.append(boot)
        return boot

    async def wait_ready(self, http: aiohttp.ClientSession) -> None:
        """Until ``/readyz`` answers 200 (at most :data:`BOUND` seconds); fails if the process exits."""
        async with asyncio.timeout(BOUND):
            while True:
                if not self.running:
                    tail = self.current.log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{self.current.label} exited while starting:\n{tail}")
                with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                    async with http.get(self.base + "/readyz", timeout=aiohttp.ClientTimeout(total=2)) as resp:
                        # Another program may have taken the port between its pick and the bind.
                        if resp.status == 200 and set((await resp.json()).get("routes", {})) == set(ROUTES):
                            self.current.ready = now()
                            return
                await asyncio.sleep(0.05)

    async def holds(self, http: aiohttp.ClientSession) -> dict[str, int]:
        """``mrtr_gateway_holds_by_route`` now, by route ({} if the replica does not answer at once)."""
        out: dict[str, int] = {}
        with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
            async with http.get(self.base + "/metrics", timeout=aiohttp.ClientTimeout(total=1)) as resp:
                for line in (await resp.text()).splitlines():
                    if line.startswith("mrtr_gateway_holds_by_route{"):
                        route = line.split('route="', 1)[1].split('"', 1)[0]
                        out[route] = int(float(line.rsplit(" ", 1)[1]))
        return out

    async def _ended(self, fate: str) -> Boot:
        assert self._proc is not None
        boot = self.current
        boot.exit_code = await self._proc.wait()
        boot.ended, boot.fate = now(), fate
        boot.gone = boot.gone or boot.ended
        return boot

    async def kill(self) -> Boot:
        assert self._proc is not None
        self.current.gone = now()
        self._proc.send_signal(signal.SIGKILL)
        return await self._ended("killed")

    async def drain(self) -> Boot:
        """SIGTERM, then wait for the exit (killed if it outlives drain_timeout + the shutdown bound)."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(self.settings.drain_timeout + SHUTDOWN_TIMEOUT + 5):
                return await self._ended("drained")
        except TimeoutError:
            self._proc.kill()
            return await self._ended("drain_overran")

    async def stop(self) -> None:
        if self._proc is None or self.current.ended is not None:
            return
        if self._proc.returncode is None:
            self._proc.kill()
        await self._ended("stopped")


def replica_config(settings: Settings, index: int, port: int, backend_url: str) -> dict[str, Any]:
    routes = [
        {
            "name": name,
            "path": f"/{name}",
            "backend": {"url": backend_url, "timeout": settings.backend_timeout},
            "holds": {"on_lost": name},
        }
        for name in ROUTES
    ]
    return {
        "state": {"keys": [settings.state_key]},
        "replica_id": f"replica-{index}",
        "listen": {"host": "127.0.0.1", "port": port, "drain_timeout": settings.drain_timeout},
        "logging": {"level": "info", "json": True},
        "replicas": {"advertise_url": f"http://127.0.0.1:{port}"},
        # Every client is anonymous, and anonymous callers share one hold budget (100 by default).
        "limits": {"max_holds_anonymous": 100_000},
        "routes": routes,
    }


@contextlib.asynccontextmanager
async def cluster(settings: Settings, backend_url: str, http: aiohttp.ClientSession) -> AsyncIterator[list[Replica]]:
    """The replicas, started and ready; every process is killed when the block ends."""
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    replicas: list[Replica] = []
    try:
        for index in range(settings.replicas):
            config = settings.log_dir / f"replica-{index}.json"
            replicas.append(Replica(index, 0, config, settings))
        starting = list(replicas)
        for attempt in range(3):  # a port picked free may be taken by another program before the bind
            for replica in starting:
                replica.port = _free_port()
                config_data = replica_config(settings, replica.index, replica.port, backend_url)
                replica.config.write_text(json.dumps(config_data), encoding="utf-8")
                await replica.start()
            outcomes = await asyncio.gather(*(r.wait_ready(http) for r in starting), return_exceptions=True)
            failed = [(r, o) for r, o in zip(starting, outcomes, strict=True) if isinstance(o, BaseException)]
            for replica, _ in failed:
                await replica.stop()
            if failed and attempt == 2:
                raise failed[0][1]
            starting = [r for r, _ in failed]
            if not starting:
                break
        yield replicas
    finally:
        for replica in replicas:
            await replica.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the client --------------------------------------------------------------------------------


@dataclass
class Send:
    replica: str
    """The process it went to (``replica-1#0``)."""
    started: float
    ended: float = 0.0
    status: int | None = None
    failure: str | None = None
    """Why it was sent again: the transport error, or ``503 <reason>``."""


@dataclass
class Step:
    """One request of a flow (0: the call; k: the retry answering round k), with every send of it."""

    index: int
    request_id: str
    sends: list[Send] = field(default_factory=list)
    answer: str = ""
    """``input_required``, ``result``, ``error`` or ``gave_up``."""
    answered: float = 0.0


@dataclass
class Lost:
    step: int
    request_id: str
    status: int | None
    reason: str | None
    cause: str | None
    code: int | None
    message: str
    replica: str
    """The process whose answer ended the flow (``-`` when no send got one)."""
    owner: str | None = None
    """The process that held the round the failing retry answered (from the replicas' logs)."""
    owner_fate: str | None = None
    """What had become of the owner when the failing answer came: ``alive``, ``killed``, ``drained``
    (None: unknown)."""
    explained: bool = False
    """On ``/error``: lost with the documented error because its owner was the killed process."""


@dataclass
class Flow:
    id: int
    route: str
    name: str
    color: str
    started: float
    ended: float = 0.0
    verdict: str = "unfinished"
    """``right``, ``wrong``, ``lost`` or ``unfinished`` (still running when the harness gave up)."""
    detail: str = ""
    asked: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    lost: Lost | None = None
    owners: list[tuple[str | None, float, float]] = field(default_factory=list)
    """Per round: (the process holding it, from, until), from the replicas' logs."""
    windows: list[str] = field(default_factory=list)
    """The faults whose window (signal to restarted-and-ready) the flow overlapped."""
    in_flight: list[str] = field(default_factory=list)
    """The faults whose signal came while the flow ran."""
    exposed: list[str] = field(default_factory=list)
    """The faults whose process held one of the flow's rounds when the signal came."""

    @property
    def expected(self) -> str:
        return f"name={self.name};color={self.color}"


class GaveUp(Exception):
    """Every send of a request failed at the transport or with 503."""


class Client:
    """Sends requests to random replicas, resending unchanged after a transport failure or a 503."""

    def __init__(
        self, http: aiohttp.ClientSession, replicas: list[Replica], settings: Settings, rng: random.Random
    ) -> None:
        self.http, self.replicas, self.settings, self.rng = http, replicas, settings, rng
        self._sending: dict[int, tuple[str, int, int | None]] = {}
        self._ids = itertools.count()
        self._sent = asyncio.Event()

    def busy(self, index: int) -> dict[str, int]:
        """Retries being sent now that cross replica ``index`` on a hop: sent to it for a call another
        replica made (it forwards them), or sent to another replica for a call it made (forwarded to
        it). The replica that made a call is the one that answered its first request."""
        crossing = collections.Counter(
            route for route, target, maker in self._sending.values() if target != maker and index in (target, maker)
        )
        return {route: crossing[route] for route in ROUTES}

    async def until_busy(self, index: int, count: int) -> None:
        """Until ``count`` retries of every route cross replica ``index`` (:meth:`busy`)."""
        while min(self.busy(index).values()) < count:
            self._sent.clear()
            await self._sent.wait()

    def _pick(self, tried: list[int]) -> int:
        fresh = [r.index for r in self.replicas if r.index not in tried]
        if not fresh:  # every replica tried: cycle, never the one just tried
            fresh = [r.index for r in self.replicas if r.index != tried[-1]] or [tried[-1]]
        return self.rng.choice(fresh)

    async def exchange(
        self, path: str, step: Step, body: bytes, maker: int | None
    ) -> tuple[int, dict[str, Any], Send, int]:
        """(HTTP status, JSON-RPC answer, the send that got it, the replica it went to); :class:`GaveUp`
        after max_sends. ``maker``: the replica that made the call (None for a first call)."""
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
            "Content-Type": "application/json",
            "Mcp-Name": TOOL,
            "X-Request-Id": step.request_id,
        }
        tried: list[int] = []
        pause = 0.0
        for _ in range(self.settings.max_sends):
            if pause:
                await asyncio.sleep(pause)  # the client's back-off between sends: the behaviour under test
            replica = self.replicas[self._pick(tried)]
            tried.append(replica.index)
            send = Send(replica.current.label, now())
            step.sends.append(send)
            pause = self.rng.uniform(0.05, 0.1)
            ident = next(self._ids)
            if step.index:
                self._sending[ident] = (path.strip("/"), replica.index, maker)
                self._sent.set()
            try:
                status, message, retry_after = await self._post(replica.base + path, body, headers)
            except (aiohttp.ClientError, TimeoutError, ConnectionError, ValueError) as exc:
                send.ended, send.failure = now(), type(exc).__name__
                continue
            finally:
                self._sending.pop(ident, None)
            send.ended, send.status = now(), status
            if status == 503:
                data = (message.get("error") or {}).get("data") or {}
                send.failure = f"503 {data.get('reason', '-')}"
                pause = max(pause, min(retry_after, 1.0))
                continue
            return status, message, send, replica.index
        raise GaveUp(", ".join(s.failure or "?" for s in step.sends))

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any], float]:
        timeout = aiohttp.ClientTimeout(total=self.settings.send_timeout)
        async with self.http.post(url, data=body, headers=headers, timeout=timeout) as resp:
            raw = await resp.read()
            retry_after = float(resp.headers.get("Retry-After", "0") or 0)
            if resp.content_type == "text/event-stream":
                messages = [json.loads(line[5:]) for line in raw.split(b"\n") if line.startswith(b"data:")]
                answers = [m for m in messages if isinstance(m, dict) and ("result" in m or "error" in m)]
                if not answers:
                    raise ValueError("the event stream ended without an answer")
                return resp.status, answers[-1], retry_after
            try:
                message = json.loads(raw)
            except ValueError:
                if resp.status == 200:
                    raise  # cut short: a transport failure
                message = {"error": {"code": None, "message": raw[:200].decode(errors="replace")}}
            return resp.status, message if isinstance(message, dict) else {"error": {"message": str(message)}}, 0.0


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _answers(flow: Flow, requests: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The flow's answers to a round's input requests, and what is wrong with the round ('' if nothing)."""
    out: dict[str, Any] = {}
    problem = ""
    for key, request in requests.items():
        params = request.get("params") or {}
        flow.asked.append(str(params.get("message")))
        wanted = list((params.get("requestedSchema") or {}).get("properties") or {})
        if request.get("method") != "elicitation/create" or wanted not in (["name"], ["color"]):
            return {}, f"unexpected input request {key}: {json.dumps(request)[:200]}"
        if wanted == ["color"] and params.get("message") != f"Hello {flow.name}, which color?":
            problem = f"round asked {params.get('message')!r} (another call's question?)"
        out[key] = {"action": "accept", "content": {"name": flow.name} if wanted == ["name"] else {"color": flow.color}}
    return out, problem


async def run_flow(client: Client, flow: Flow, think: tuple[float, float]) -> None:
    """One ask_two call to its end: right, wrong or lost (``flow`` is filled in as it goes)."""
    path = f"/{flow.route}"
    extra: dict[str, Any] = {}
    maker: int | None = None
    for index in range(MAX_STEPS):
        step = Step(index, f"chaos-{flow.id}-{index}")
        flow.steps.append(step)
        params = {"name": TOOL, "arguments": {}, **extra}
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": CAPS,
        }
        body = json.dumps({"jsonrpc": "2.0", "id": flow.id * 100 + index, "method": "tools/call", "params": params})
        try:
            status, message, send, target = await client.exchange(path, step, body.encode(), maker)
        except GaveUp as exc:
            step.answer = "gave_up"
            flow.verdict, flow.detail = "lost", f"gave up after {len(step.sends)} sends: {exc}"
            flow.lost = Lost(index, step.request_id, None, "client_gave_up", str(exc)[:120], None, "", "-")
            return
        step.answered, replica = now(), send.replica
        result = message.get("result")
        if not isinstance(result, dict):
            error = _object(message.get("error"))
            data = _object(error.get("data"))
            step.answer = "error"
            flow.verdict = "lost"
            reason, cause = data.get("reason"), data.get("cause")
            flow.lost = Lost(
                index, step.request_id, status, reason, cause, error.get("code"), str(error.get("message")), replica
            )
            flow.detail = f"HTTP {status} {error.get('code')} {reason}/{cause} from {replica} at step {index}"
            return
        if result.get("resultType") == "input_required":
            step.answer = "input_required"
            maker = target if maker is None else maker
            answers, problem = _answers(flow, result.get("inputRequests") or {})
            if not answers or problem:
                flow.verdict, flow.detail = "wrong", problem or "a round with no input requests"
                return
            extra = {"inputResponses": answers, "requestState": result.get("requestState")}
            await asyncio.sleep(client.rng.uniform(*think))  # the user answering: the behaviour under test
            continue
        step.answer = "result"
        text = " ".join(c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text")
        right = text == flow.expected and not result.get("isError")
        flow.verdict = "right" if right else "wrong"
        flow.detail = "" if right else f"got {text!r}, expected {flow.expected!r}"
        return
    flow.verdict, flow.detail = "wrong", f"more than {MAX_STEPS} requests"


# -- load and faults ---------------------------------------------------------------------------


@dataclass
class Fault:
    name: str
    """``kill`` or ``drain``."""
    replica: str
    boot: str
    """The process the signal ended (``replica-1#0``)."""
    signal_at: float
    holds_before: dict[str, int] = field(default_factory=dict)
    """``mrtr_gateway_holds_by_route`` of the replica just before the wait for a busy moment."""
    drain: dict[str, Any] = field(default_factory=dict)
    """The drained process's ``drain_ended`` line (:attr:`Boot.drain`)."""
    busy_at_signal: dict[str, int] = field(default_factory=dict)
    """Retries in flight crossing the replica on a hop when the signal came, by route (:meth:`Client.busy`)."""
    exited_at: float = 0.0
    exit_code: int | None = None
    restarted_at: float = 0.0
    ready_at: float = 0.0
    restarted_boot: str = ""


async def faults(client: Client, settings: Settings, t0: float) -> list[Fault]:
    """The schedule: SIGKILL at kill_at and restart kill_down later; SIGTERM at drain_at and restart
    once the process exited. Each signal comes at the first moment (within ``busy_wait`` s of its
    time) when ``busy_min`` retries of each route cross its replica on a hop (:meth:`Client.busy`)."""
    replicas, http = client.replicas, client.http
    done: list[Fault] = []
    plan = sorted(
        [(settings.kill_at, "kill", settings.kill_replica), (settings.drain_at, "drain", settings.drain_replica)]
    )
    for at, name, index in plan:
        await asyncio.sleep(max(0.0, t0 + at - now()))  # the schedule itself
        replica = replicas[index]
        holds = await replica.holds(http)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(settings.busy_wait):
                await client.until_busy(index, settings.busy_min)
        fault = Fault(
            name, replica.id, replica.current.label, now(), holds_before=holds, busy_at_signal=client.busy(index)
        )
        done.append(fault)
        boot = await (replica.kill() if name == "kill" else replica.drain())
        fault.exited_at, fault.exit_code = boot.ended or now(), boot.exit_code
        if name == "kill":
            await asyncio.sleep(settings.kill_down)  # the replica stays dead this long: the behaviour under test
        fault.restarted_at = now()
        fault.restarted_boot = (await replica.start()).label
        await replica.wait_ready(http)
        fault.ready_at = now()
    return done


async def load(client: Client, settings: Settings, t0: float, flows: list[Flow]) -> None:
    counter = itertools.count(1)
    end = t0 + settings.seconds

    async def one_client(index: int) -> None:
        route = ROUTES[index % len(ROUTES)]
        while now() < end:
            ident = next(counter)
            flow = Flow(ident, route, f"ann{ident}", f"teal{ident}", now())
            flows.append(flow)
            try:
                await run_flow(client, flow, settings.think)
            finally:
                flow.ended = now()

    tasks = [asyncio.create_task(one_client(i)) for i in range(settings.clients)]
    try:
        await asyncio.wait(tasks, timeout=settings.seconds + settings.grace)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# -- the post-mortem: who held what, from the replicas' request lines -----------------------


@dataclass
class Line:
    boot: str
    at: float
    fields: dict[str, Any]


def read_logs(replicas: list[Replica]) -> list[Line]:
    """Every process's request lines; a drained process's ``drain_ended`` line also sets its
    :attr:`Boot.gone` (it serves nothing after it) and, when the drain ran out of time with calls
    still held, its fate (``drain_timed_out``: the holds left were expired)."""
    lines: list[Line] = []
    for replica in replicas:
        for boot in replica.boots:
            if not boot.log.exists():
                continue
            for raw in boot.log.read_text(errors="replace").splitlines():
                if not raw.startswith("{"):
                    continue
                with contextlib.suppress(ValueError):
                    entry = json.loads(raw)
                    at = datetime.fromisoformat(str(entry.get("timestamp")).replace("Z", "+00:00")).timestamp()
                    if entry.get("event") == "request":
                        lines.append(Line(boot.label, at, entry))
                    elif entry.get("event") == "drain_ended":
                        boot.drain = {k: entry.get(k) for k in ("drained", "holds", "in_flight")}
                        boot.gone = min(boot.gone or at, at)
                        if entry.get("drained") is False and boot.fate == "drained":
                            boot.fate = "drain_timed_out"
    return lines


def attribute_owners(flows: Iterable[Flow], lines: list[Line]) -> None:
    """Fill in each flow's ``owners``: the process that made each round (its ``input_required``).

    A round is made by the process whose request line carries the client's ``X-Request-Id`` and
    ``outcome: input_required`` (a first call, a retry resumed or replayed where it landed), or,
    for a retry forwarded to the owner, by the line with the forwarding line's ``hold`` and
    ``round`` and ``outcome: input_required`` (the owner's line has an id of its own)."""
    by_request: dict[str, list[Line]] = collections.defaultdict(list)
    made: dict[tuple[str, int], list[Line]] = collections.defaultdict(list)
    for line in lines:
        by_request[str(line.fields.get("request_id"))].append(line)
        if line.fields.get("outcome") == "input_required" and "hold" in line.fields:
            made[(str(line.fields["hold"]), int(line.fields.get("round", 0)))].append(line)
    for flow in flows:
        flow.owners = []
        for index, step in enumerate(flow.steps):
            if step.answer != "input_required":
                continue
            mine = by_request.get(step.request_id, [])
            direct = [x for x in mine if x.fields.get("outcome") == "input_required"]
            maker: Line | None = max(direct, key=lambda x: x.at) if direct else None
            if maker is None:
                for hop in (x for x in mine if x.fields.get("outcome") == "forwarded"):
                    key = (str(hop.fields.get("hold")), int(hop.fields.get("round", 0)))
                    near = [x for x in made.get(key, []) if x.boot != hop.boot]
                    if near:
                        maker = min(near, key=lambda x: abs(x.at - hop.at))
            following = flow.steps[index + 1] if index + 1 < len(flow.steps) else None
            until = (following.answered or (following.sends[-1].ended if following.sends else 0.0)) if following else 0
            flow.owners.append((maker.boot if maker else None, step.answered, until or flow.ended))


def judge(flows: list[Flow], faults_done: list[Fault], boots: dict[str, Boot]) -> None:
    """Fault windows each flow overlapped; the owner of each lost flow's round and whether that
    explains it (``/error``: the documented hold_lost, its owner the killed process)."""
    for flow in flows:
        end = flow.ended or now()
        for fault in faults_done:
            window_end = fault.ready_at or end
            if flow.started <= window_end and end >= fault.signal_at:
                flow.windows.append(fault.name)
            if flow.started <= fault.signal_at <= end:
                flow.in_flight.append(fault.name)
            if any(o == fault.boot and start <= fault.signal_at <= stop for o, start, stop in flow.owners):
                flow.exposed.append(fault.name)
        lost = flow.lost
        if lost is None or lost.step == 0:
            continue
        round_index = lost.step - 1  # the round the failing retry answered
        owner = flow.owners[round_index][0] if round_index < len(flow.owners) else None
        lost.owner = owner
        sends = flow.steps[lost.step].sends
        failed_at = sends[-1].ended if sends else flow.ended
        if owner in boots:
            boot = boots[owner]
            lost.owner_fate = boot.fate if boot.gone is not None and boot.gone <= failed_at else "alive"
        lost.explained = lost.owner_fate == "killed" and lost.reason == HOLD_LOST and lost.cause in DOCUMENTED_CAUSES


# -- the verdict -------------------------------------------------------------------------------


def _tally(flows: list[Flow]) -> dict[str, Any]:
    counts = collections.Counter(f.verdict for f in flows)
    reasons = collections.Counter(_why(f.lost) for f in flows if f.lost is not None)
    return {
        "flows": len(flows),
        "right": counts["right"],
        "wrong": counts["wrong"],
        "lost": counts["lost"],
        "unfinished": counts["unfinished"],
        "lost_reasons": dict(reasons.most_common()),
    }


def _why(lost: Lost) -> str:
    return f"{lost.status or '-'} {lost.reason or lost.code}/{lost.cause or '-'}"


def lost_record(flow: Flow) -> dict[str, Any]:
    lost = flow.lost
    assert lost is not None
    step = flow.steps[lost.step]
    return {
        "flow": flow.id,
        "route": flow.route,
        "step": lost.step,
        "request_id": lost.request_id,
        "status": lost.status,
        "code": lost.code,
        "reason": lost.reason,
        "cause": lost.cause,
        "message": lost.message[:160],
        "answered_by": lost.replica,
        "owner": lost.owner,
        "owner_fate": lost.owner_fate,
        "explained": lost.explained,
        "windows": flow.windows,
        "sends": [f"{s.replica}:{s.status or '-'}:{s.failure or 'answered'}" for s in step.sends],
        "earlier_sends": [len(s.sends) for s in flow.steps[: lost.step]],
    }


def summarize(flows: list[Flow], faults_done: list[Fault], settings: Settings, seconds: float) -> dict[str, Any]:
    sends = [s for f in flows for st in f.steps for s in st.sends]
    report: dict[str, Any] = {
        "settings": {
            "replicas": settings.replicas,
            "clients": settings.clients,
            "load_seconds": settings.seconds,
            "kill_at": settings.kill_at,
            "kill_down": settings.kill_down,
            "drain_at": settings.drain_at,
            "drain_timeout": settings.drain_timeout,
            "max_sends": settings.max_sends,
            "think_s": list(settings.think),
            "seed": settings.seed,
        },
        "seconds": round(seconds, 1),
        "faults": [
            {
                "name": x.name,
                "process": x.boot,
                "holds_before": x.holds_before,
                "hops_in_flight_at_signal": x.busy_at_signal,
                **({"drain_ended": x.drain} if x.drain else {}),
                "exit_code": x.exit_code,
                "exited_after_s": round(x.exited_at - x.signal_at, 2),
                "restarted_as": x.restarted_boot,
                "window_s": round((x.ready_at or x.signal_at) - x.signal_at, 2),
            }
            for x in faults_done
        ],
        "routes": {r: _tally([f for f in flows if f.route == r]) for r in ROUTES},
        "per_fault": {},
        "sends": {
            "total": len(sends),
            "resent": collections.Counter(s.failure for s in sends if s.failure).most_common(),
        },
        "lost": [lost_record(f) for f in flows if f.lost is not None],
        "wrong": [{"flow": f.id, "route": f.route, "detail": f.detail} for f in flows if f.verdict == "wrong"],
        "unfinished": [f.id for f in flows if f.verdict == "unfinished"],
    }
    for x in faults_done:
        report["per_fault"][x.name] = {
            r: {
                **_tally([f for f in flows if f.route == r and x.name in f.windows]),
                "in_flight_at_signal": sum(1 for f in flows if f.route == r and x.name in f.in_flight),
                "held_by_faulted_process": sum(1 for f in flows if f.route == r and x.name in f.exposed),
            }
            for r in ROUTES
        }
    return report


def problems(report: dict[str, Any]) -> list[str]:
    """Every rule of the verdict the run broke (empty: nothing lost that should not be)."""
    out: list[str] = []
    replay, error = report["routes"]["replay"], report["routes"]["error"]
    if replay["wrong"]:
        out.append(f"/replay: {replay['wrong']} wrong")
    if replay["lost"]:
        out.append(f"/replay: {replay['lost']} lost {replay['lost_reasons']}")
    if error["wrong"]:
        out.append(f"/error: {error['wrong']} wrong")
    unexplained = [x for x in report["lost"] if x["route"] == "error" and not x["explained"]]
    if unexplained:
        why = collections.Counter(
            f"{x['status']} {x['reason']}/{x['cause'] or '-'} owner {x['owner_fate']}" for x in unexplained
        )
        out.append(f"/error: {len(unexplained)} lost not explained by the killed owner {dict(why)}")
    for route in ROUTES:
        if report["routes"][route]["unfinished"]:
            out.append(f"/{route}: {report['routes'][route]['unfinished']} unfinished")
    return out


def coverage_problems(report: dict[str, Any], *, min_right: int, min_in_window: int, min_in_flight: int) -> list[str]:
    """What makes a run vacuous: too few flows completed right on a route (over the run, and in
    each fault's window), or too few in flight when a signal came."""
    out: list[str] = []
    for route in ROUTES:
        if report["routes"][route]["right"] < min_right:
            out.append(f"/{route}: only {report['routes'][route]['right']} flows right (< {min_right})")
    names = [x["name"] for x in report["faults"]]
    if sorted(names) != ["drain", "kill"]:
        out.append(f"faults run: {names}")
    for name, routes in report["per_fault"].items():
        for route, figures in routes.items():
            if figures["in_flight_at_signal"] < min_in_flight:
                out.append(f"{name}: {figures['in_flight_at_signal']} /{route} flows in flight (< {min_in_flight})")
            if figures["right"] < min_in_window:
                out.append(f"{name}: only {figures['right']} /{route} flows right in its window (< {min_in_window})")
    return out


def render(report: dict[str, Any]) -> str:
    lines = [f"chaos: {report['settings']['clients']} clients, {report['seconds']} s"]
    for x in report["faults"]:
        lines.append(
            f"  fault {x['name']}: {x['process']} (holds {x['holds_before']}, retries crossing it on a hop "
            f"{x['hops_in_flight_at_signal']}) exit {x['exit_code']} after "
            f"{x['exited_after_s']} s{', ' + str(x['drain_ended']) if 'drain_ended' in x else ''}, "
            f"back as {x['restarted_as']}, window {x['window_s']} s"
        )
    for route, t in report["routes"].items():
        lines.append(f"  /{route}: {t['flows']} flows, right {t['right']}, wrong {t['wrong']}, lost {t['lost']}")
        if t["lost_reasons"]:
            lines.append(f"      lost: {t['lost_reasons']}")
    for name, routes in report["per_fault"].items():
        for route, t in routes.items():
            lines.append(
                f"  {name} /{route}: in window {t['flows']} (in flight at signal {t['in_flight_at_signal']}, held by "
                f"the faulted process {t['held_by_faulted_process']}): right {t['right']}, wrong {t['wrong']}, "
                f"lost {t['lost']} {t['lost_reasons'] or ''}"
            )
    lines.append(f"  sends {report['sends']['total']}, resent after: {report['sends']['resent']}")
    for x in report["lost"]:
        lines.append(
            f"  lost flow {x['flow']} /{x['route']} step {x['step']}: HTTP {x['status']} "
            f"{x['reason']}/{x['cause'] or '-'} from {x['answered_by']}, owner {x['owner']} ({x['owner_fate']}), "
            f"explained {x['explained']}, windows {x['windows']}, sends {x['sends']}"
        )
    for x in report["wrong"]:
        lines.append(f"  wrong flow {x['flow']} /{x['route']}: {x['detail']}")
    verdict = problems(report)
    lines.append("  verdict: " + ("nothing lost that should not be" if not verdict else "; ".join(verdict)))
    return "\n".join(lines)


async def run(backend_url: str, settings: Settings) -> dict[str, Any]:
    """The whole run against the legacy server at ``backend_url``; the report (:func:`summarize`)."""
    rng = random.Random(settings.seed)
    flows: list[Flow] = []
    started = now()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http, cluster(settings, backend_url, http) as replicas:
        client = Client(http, replicas, settings, rng)
        t0 = now()
        schedule = asyncio.create_task(faults(client, settings, t0))
        try:
            await load(client, settings, t0, flows)
            async with asyncio.timeout(BOUND * 2):
                faults_done = await schedule
        finally:
            schedule.cancel()
            await asyncio.gather(schedule, return_exceptions=True)
        await asyncio.sleep(0.2)  # the last request lines reach the log files
    boots = {b.label: b for r in replicas for b in r.boots}
    attribute_owners(flows, read_logs(replicas))
    for fault in faults_done:
        fault.drain = boots[fault.boot].drain
    judge(flows, faults_done, boots)
    return summarize(flows, faults_done, settings, now() - started)


# -- the benchmark entry -----------------------------------------------------------------------


def next_result_path() -> Path:
    for n in itertools.count(1):
        path = ROOT / f"bench/results/issue26-chaos-{n}.json"
        if not path.exists():
            return path
    raise AssertionError("unreachable")


def _git(*args: str) -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(
            ["git", *args], check=False, cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    return ""


@contextlib.contextmanager
def legacy_peer(log_dir: Path) -> Iterator[str]:
    """The project's legacy FastMCP peer (mcp 1.30.0, .venv-legacy), streamable HTTP; its URL."""
    from bench.harness import legacy_python

    port = _free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / "legacy-peer.log").open("wb") as sink:
        argv = [legacy_python(), "tests/peers/legacy_fastmcp.py", "--port", str(port), "--log-level", "WARNING"]
        proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sink)
    try:
        deadline = time.monotonic() + BOUND
        while True:
            with contextlib.suppress(OSError):
                import socket

                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the legacy peer did not start: {(log_dir / 'legacy-peer.log').read_text()}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def bench(
    clients: int = 100,
    seconds: float = 40.0,
    out: Path | None = None,
    seed: int | None = None,
    label: str = "",
    gateway_src: Path | None = None,
) -> dict[str, Any]:
    """The benchmark's run: ``clients`` clients for ``seconds`` s, the kill a quarter of the way in,
    the drain (``drain_timeout`` 10 s) at 55 %; the report printed and written to ``out`` (default: the next
    ``bench/results/issue26-chaos-<n>.json``)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # the replicas' connection cap follows it
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 20000), hard), hard))
    out = out or next_result_path()
    settings = Settings(
        clients=clients,
        seconds=seconds,
        kill_at=round(seconds * 0.25, 1),
        drain_at=round(seconds * 0.55, 1),
        # 100 clients on 2 cores take seconds per call: a drain needs that long to finish the calls it
        # holds (with 3 s it ends with holds left, which are expired: lost on /error, replayed on /replay).
        drain_timeout=10.0,
        log_dir=Path(tempfile.mkdtemp(prefix="mrtr-chaos-")),
        gateway_src=gateway_src,
        seed=seed,
    )
    print(f"chaos: {clients} clients for {seconds:g} s; replica logs in {settings.log_dir}")
    with legacy_peer(settings.log_dir) as backend:
        report = asyncio.run(run(backend, settings))
    report["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    report["gateway"] = {
        "src": str(gateway_src or ROOT),
        # The tree's; with --gateway-src the package measured is that directory's (say which in --label).
        "tree_commit": _git("rev-parse", "--short", "HEAD"),
        "tree_gateway_dirty": bool(_git("status", "--porcelain", "gateway")),
    }
    report["label"] = label
    report["verdict"] = problems(report)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(render(report))
    print(f"report: {out}")
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--json", type=Path, default=None, help="default: bench/results/issue26-chaos-<n>.json")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--label", default="")
    parser.add_argument("--gateway-src", type=Path, default=None, help="run the gateway package in this dir")
    args = parser.parse_args()
    report = bench(args.clients, args.seconds, args.json, args.seed, args.label, args.gateway_src)
    return 1 if report["verdict"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
