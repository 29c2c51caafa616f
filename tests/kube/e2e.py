"""Client side of scripts/kube-e2e.sh: 2026-07-28 calls against the gateway in the test cluster.

Run with the project's virtualenv (aiohttp) from the repository root, by the script:

    .venv/bin/python -m tests.kube.e2e --kubectl K --kubeconfig C --namespace N --selector S \
        --service http://<ClusterIP>:80 COMMAND ...

Commands (each prints its figures, one line per check, and exits 0 only when every check passed):

  probes                 GET /healthz /readyz /metrics on every gateway pod's IP and through the Service
  flow                   one two-round call (the demo's ask_two) through the Service
  hop                    a two-round call started on one pod whose retries go to the OTHER pod (the
                         replica hop): the answer is right and the other pod counted the forwards
  load --event E         8-20 clients running two-round calls (ask_two, think time between rounds)
                         through the Service while E happens: rollout (kubectl rollout restart), delete
                         (kubectl delete pod) or kill (SIGKILL of a gateway container's task through
                         containerd). A request that fails at the transport or with HTTP 503 is sent
                         again, byte for byte, to another pod (by pod IP). Counts right / wrong / lost;
                         every lost flow is printed with its error (data.reason, data.cause, status).
  rotate                 key rotation through the Secret: add a key last, wait until every pod logged
                         state_keys_reloaded with it, then move it first and wait again (each wait
                         timed), while a call held since before the rotation is finished after it;
                         then a new call across pods.

The demo server's ask_two asks "What is your name?" and then "Hello <name>, what is your favourite
color?" and answers "name=<name>;color=<color>": the second question and the answer prove the
rounds belong to the same call.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import glob
import itertools
import json
import random
import re
import secrets
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

MODERN = "2026-07-28"
CAPS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
TOOL = "ask_two"
PATH = "/mcp"
GATEWAY_PORT = 8080


def say(line: str) -> None:
    print(f"   {line}", flush=True)


# --- the cluster, through kubectl ------------------------------------------------------------------


@dataclass
class Kube:
    kubectl: str
    kubeconfig: str
    namespace: str
    selector: str
    ctr_address: str = ""

    async def run(self, *args: str, timeout: float = 60, check: bool = True) -> str:
        proc = await asyncio.create_subprocess_exec(
            self.kubectl,
            "--kubeconfig",
            self.kubeconfig,
            "-n",
            self.namespace,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        if check and proc.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)}: {err.decode().strip()[:300]}")
        return out.decode()

    async def pods(self) -> list[dict[str, Any]]:
        """The gateway pods: name, ip, ready, deleting, restarts, container id."""
        data = json.loads(await self.run("get", "pods", "-l", self.selector, "-o", "json", timeout=20))
        pods = []
        for item in data.get("items", []):
            status = item.get("status", {})
            conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
            containers = [c for c in status.get("containerStatuses", []) if c.get("name") == "gateway"]
            pods.append(
                {
                    "name": item["metadata"]["name"],
                    "ip": status.get("podIP") or "",
                    "ready": conditions.get("Ready") == "True",
                    "deleting": bool(item["metadata"].get("deletionTimestamp")),
                    "restarts": containers[0].get("restartCount", 0) if containers else 0,
                    "container": (containers[0].get("containerID") or "").split("//")[-1] if containers else "",
                    "phase": status.get("phase"),
                }
            )
        return sorted(pods, key=lambda p: p["name"])

    async def ready_pods(self) -> list[dict[str, Any]]:
        return [p for p in await self.pods() if p["ready"] and not p["deleting"] and p["ip"]]

    async def logs(self, pod: str) -> str:
        return await self.run("logs", pod, "-c", "gateway", timeout=20, check=False)


def pod_url(ip: str, path: str = PATH) -> str:
    return f"http://{ip}:{GATEWAY_PORT}{path}"


async def metric(http: aiohttp.ClientSession, ip: str, name: str, labels: dict[str, str] | None = None) -> float:
    """Sum of the samples of ``name`` on one pod whose labels include ``labels``."""
    async with http.get(pod_url(ip, "/metrics"), timeout=aiohttp.ClientTimeout(total=5)) as resp:
        text = await resp.text()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(found.get(k) == v for k, v in (labels or {}).items()):
            total += float(m.group(3))
    return total


# --- the 2026-07-28 client (BareClient of tests/harness.py, over raw HTTP) -------------------------


def call_body(
    request_id: int, extra: dict[str, Any] | None = None, tool: str = TOOL, arguments: dict[str, Any] | None = None
) -> bytes:
    params: dict[str, Any] = {"name": tool, "arguments": arguments or {}, **(extra or {})}
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": CAPS,
    }
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": MODERN,
    "Mcp-Method": "tools/call",
    "Mcp-Name": TOOL,
    "Content-Type": "application/json",
}


class CutShort(Exception):
    """A 200 whose body ended before the answer: a transport failure for the client."""


async def post(
    http: aiohttp.ClientSession, url: str, body: bytes, timeout: float = 30, tool: str = TOOL
) -> tuple[int, dict[str, Any], float]:
    """(HTTP status, the JSON-RPC answer, Retry-After) of one POST; SSE or JSON."""
    headers = HEADERS if tool == TOOL else {**HEADERS, "Mcp-Name": tool}
    async with http.post(url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
        raw = await resp.read()
        retry_after = float(resp.headers.get("Retry-After", "0") or 0)
        if resp.content_type == "text/event-stream":
            messages = [json.loads(line[5:]) for line in raw.split(b"\n") if line.startswith(b"data:")]
            answers = [m for m in messages if isinstance(m, dict) and ("result" in m or "error" in m)]
            if not answers:
                raise CutShort("the event stream ended without an answer")
            return resp.status, answers[-1], retry_after
        try:
            message = json.loads(raw)
        except ValueError:
            if resp.status == 200:
                raise CutShort("a 200 with a body that is not JSON") from None
            message = {"error": {"code": None, "message": raw[:200].decode(errors="replace")}}
        return resp.status, message if isinstance(message, dict) else {"error": {"message": str(message)}}, retry_after


def answers_for(result: dict[str, Any], name: str, color: str) -> tuple[dict[str, Any], str]:
    """The answers to one round's input requests, and what is wrong with the round ('' if nothing)."""
    out: dict[str, Any] = {}
    for key, request in (result.get("inputRequests") or {}).items():
        params = request.get("params") or {}
        wanted = list((params.get("requestedSchema") or {}).get("properties") or {})
        if request.get("method") != "elicitation/create" or wanted not in (["name"], ["color"]):
            return {}, f"unexpected input request {key}: {json.dumps(request)[:200]}"
        if wanted == ["color"] and params.get("message") != f"Hello {name}, what is your favourite color?":
            return {}, f"second question {params.get('message')!r}: not this call's"
        out[key] = {"action": "accept", "content": {"name": name} if wanted == ["name"] else {"color": color}}
    if not out:
        return {}, "a round with no input requests"
    return out, ""


def text_of(result: dict[str, Any]) -> str:
    return " ".join(c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text")


async def simple_flow(http: aiohttp.ClientSession, urls: list[str], tag: str) -> tuple[bool, str]:
    """ask_two with its three requests sent to urls[0], urls[1], urls[2]: (right, what happened)."""
    name, color = f"{tag}-{secrets.token_hex(3)}", random.choice(["red", "green", "blue"])
    extra: dict[str, Any] = {}
    steps = []
    for index, url in enumerate(urls):
        status, message, _ = await post(http, url, call_body(index + 1, extra))
        result = message.get("result")
        if not isinstance(result, dict):
            error = message.get("error") or {}
            data = error.get("data") or {}
            return (
                False,
                f"request {index + 1} -> HTTP {status} error {error.get('code')}"
                f" {data.get('reason')}/{data.get('cause')}: {error.get('message')}",
            )
        if result.get("resultType") == "input_required":
            answers, problem = answers_for(result, name, color)
            if problem:
                return False, f"request {index + 1}: {problem}"
            steps.append(f"{status} input_required({','.join(answers)})")
            extra = {"inputResponses": answers, "requestState": result.get("requestState")}
            continue
        text = text_of(result)
        steps.append(f"{status} {text!r}")
        expected = f"name={name};color={color}"
        return text == expected and not result.get("isError"), " -> ".join(steps) + f" (expected {expected!r})"
    return False, " -> ".join(steps) + " (no final answer)"


# --- commands ------------------------------------------------------------------------------------


async def cmd_probes(kube: Kube, service: str, http: aiohttp.ClientSession) -> bool:
    ok = True
    pods = await kube.ready_pods()
    targets = [(p["name"], f"http://{p['ip']}:{GATEWAY_PORT}") for p in pods] + [("Service", service)]
    for label, base in targets:
        parts = []
        for path in ("/healthz", "/readyz", "/metrics"):
            try:
                async with http.get(base + path, timeout=aiohttp.ClientTimeout(total=5)) as resp:
                    body = await resp.text()
                    good = resp.status == 200 and (
                        "mrtr_gateway_" in body
                        if path == "/metrics"
                        else ('"ready"' in body if path == "/readyz" else True)
                    )
                    parts.append(f"{path} {resp.status} ({len(body)} bytes){'' if good else ' BAD'}")
                    ok &= good
            except (aiohttp.ClientError, TimeoutError) as exc:
                parts.append(f"{path} {type(exc).__name__}")
                ok = False
        say(f"{label} {base}: " + ", ".join(parts))
    if len(pods) < 2:
        say(f"only {len(pods)} ready pod(s)")
        ok = False
    return ok


async def cmd_flow(kube: Kube, service: str, http: aiohttp.ClientSession) -> bool:
    right, detail = await simple_flow(http, [service + PATH] * 3, "svc")
    say(f"ask_two through the Service {service}: {detail}")
    return right


async def cmd_hop(kube: Kube, service: str, http: aiohttp.ClientSession) -> bool:
    pods = await kube.ready_pods()
    if len(pods) < 2:
        say(f"needs two ready pods, has {len(pods)}")
        return False
    a, b = pods[0], pods[1]
    before = {o: await metric(http, b["ip"], "mrtr_gateway_forwards_total", {"outcome": o}) for o in ("forwarded",)}
    right, detail = await simple_flow(http, [pod_url(a["ip"]), pod_url(b["ip"]), pod_url(b["ip"])], "hop")
    after = await metric(http, b["ip"], "mrtr_gateway_forwards_total", {"outcome": "forwarded"})
    forwarded = after - before["forwarded"]
    say(f"call on {a['name']} ({a['ip']}), both retries sent to {b['name']} ({b['ip']}): {detail}")
    say(
        f'{b["name"]} mrtr_gateway_forwards_total{{outcome="forwarded"}}:'
        f" {before['forwarded']:.0f} -> {after:.0f} (+{forwarded:.0f}, want +2)"
    )
    return right and forwarded >= 2


# --- load under an event ---------------------------------------------------------------------------


@dataclass
class Flow:
    ident: int
    name: str
    color: str
    started: float = 0.0
    ended: float = 0.0
    verdict: str = ""
    detail: str = ""
    sends: int = 0
    resends: collections.Counter[str] = field(default_factory=collections.Counter)
    held_at_event: bool = False


class Load:
    def __init__(self, kube: Kube, service: str, http: aiohttp.ClientSession, rng: random.Random) -> None:
        self.kube, self.service, self.http, self.rng = kube, service, http, rng
        self.pods: list[dict[str, Any]] = []
        self.flows: list[Flow] = []
        self.thinking: set[int] = set()
        self.ids = itertools.count(1)
        self.event_at = 0.0
        self.stop_new = asyncio.Event()

    async def watch_pods(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                self.pods = await self.kube.pods()
            await asyncio.sleep(1)

    def pick(self, tried: list[str]) -> str:
        ready = [p["ip"] for p in self.pods if p["ready"] and not p["deleting"] and p["ip"]]
        fresh = [ip for ip in ready if ip not in tried] or [
            p["ip"] for p in self.pods if p["ip"] and p["ip"] not in tried
        ]
        if not fresh:
            fresh = (
                [ip for ip in ready if not tried or ip != tried[-1]] or ready or [p["ip"] for p in self.pods if p["ip"]]
            )
        return self.rng.choice(fresh) if fresh else ""

    async def exchange(self, flow: Flow, body: bytes) -> tuple[int, dict[str, Any]]:
        """First send through the Service; a transport failure or a 503 is sent again, unchanged, to a pod."""
        url, last = self.service + PATH, ""
        tried: list[str] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            flow.sends += 1
            try:
                status, message, retry_after = await post(self.http, url, body)
            except (aiohttp.ClientError, TimeoutError, ConnectionError, CutShort) as exc:
                last = type(exc).__name__
                flow.resends[last] += 1
                await asyncio.sleep(self.rng.uniform(0.05, 0.15))
            else:
                if status != 503:
                    return status, message
                data = ((message.get("error") or {}).get("data")) or {}
                last = f"503 {data.get('reason', '-')}"
                flow.resends[last] += 1
                await asyncio.sleep(max(self.rng.uniform(0.05, 0.15), min(retry_after, 1.0)))
            ip = self.pick(tried)
            if ip:
                tried.append(ip)
                url = pod_url(ip)
        raise TimeoutError(f"gave up after {flow.sends} sends, last: {last}")

    async def run_flow(self, flow: Flow) -> None:
        flow.started = time.monotonic()
        extra: dict[str, Any] = {}
        try:
            for index in range(4):
                try:
                    status, message = await self.exchange(flow, call_body(flow.ident * 10 + index, extra))
                except TimeoutError as exc:
                    flow.verdict, flow.detail = "lost", f"request {index + 1}: {exc}"
                    return
                result = message.get("result")
                if not isinstance(result, dict):
                    error = message.get("error") or {}
                    data = error.get("data") or {}
                    flow.verdict = "lost"
                    flow.detail = (
                        f"request {index + 1}: HTTP {status}, error {error.get('code')},"
                        f" data.reason={data.get('reason')},"
                        f" data.cause={data.get('cause')}: {str(error.get('message'))[:160]}"
                    )
                    return
                if result.get("resultType") == "input_required":
                    answers, problem = answers_for(result, flow.name, flow.color)
                    if problem:
                        flow.verdict, flow.detail = "wrong", f"request {index + 1}: {problem}"
                        return
                    extra = {"inputResponses": answers, "requestState": result.get("requestState")}
                    self.thinking.add(flow.ident)
                    try:
                        await asyncio.sleep(self.rng.uniform(0.3, 2.0))  # the user answering: holds live meanwhile
                    finally:
                        self.thinking.discard(flow.ident)
                    continue
                text, expected = text_of(result), f"name={flow.name};color={flow.color}"
                right = text == expected and not result.get("isError")
                flow.verdict = "right" if right else "wrong"
                flow.detail = "" if right else f"got {text!r}, expected {expected!r}"
                return
            flow.verdict, flow.detail = "wrong", "more than 4 requests"
        finally:
            flow.ended = time.monotonic()

    async def client(self, index: int) -> None:
        while not self.stop_new.is_set():
            flow = Flow(
                next(self.ids), f"c{index}-{secrets.token_hex(3)}", self.rng.choice(["red", "green", "blue", "teal"])
            )
            self.flows.append(flow)
            await self.run_flow(flow)

    async def holds_on(self, ip: str) -> float:
        try:
            return await metric(self.http, ip, "mrtr_gateway_holds")
        except (aiohttp.ClientError, TimeoutError):
            return -1


async def counters(http: aiohttp.ClientSession, pod: dict[str, Any]) -> str:
    """A pod's retries forwarded / replayed and resends answered again, by outcome (since its start)."""
    try:
        async with http.get(pod_url(pod["ip"], "/metrics"), timeout=aiohttp.ClientTimeout(total=5)) as resp:
            text = await resp.text()
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"{pod['name']}: /metrics {type(exc).__name__}"
    sums: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        m = re.match(r'^mrtr_gateway_(forwards|resends)_total\{[^}]*outcome="([^"]+)"[^}]*\}\s+(\S+)', line)
        if m and float(m.group(3)):
            sums[f"{m.group(1)}:{m.group(2)}"] += int(float(m.group(3)))
    return f"{pod['name']} " + (", ".join(f"{k}={v}" for k, v in sorted(sums.items())) or "no forwards or resends")


async def event_rollout(load: Load, deployment: str) -> str:
    before = {p["name"] for p in load.pods}
    await load.kube.run("rollout", "restart", f"deployment/{deployment}")
    load.event_at = time.monotonic()
    say(f"event: kubectl rollout restart deployment/{deployment} (pods before: {', '.join(sorted(before))})")
    await load.kube.run("rollout", "status", f"deployment/{deployment}", "--timeout", "240s", timeout=250)
    for _ in range(120):  # until the old pods are gone, not just the new ones ready
        names = {p["name"] for p in await load.kube.pods()}
        if not names & before:
            break
        await asyncio.sleep(1)
    after = {p["name"] for p in await load.kube.pods()}
    return f"rollout complete, pods now: {', '.join(sorted(after))}"


async def event_delete(load: Load, target: dict[str, Any]) -> str:
    await load.kube.run("delete", "pod", target["name"], "--wait=false")
    load.event_at = time.monotonic()
    say(f"event: kubectl delete pod {target['name']} ({target['ip']})")
    for _ in range(240):
        pods = await load.kube.pods()
        ready = [p for p in pods if p["ready"] and not p["deleting"]]
        if target["name"] not in {p["name"] for p in pods} and len(ready) >= 2:
            return f"{target['name']} gone, ready: {', '.join(p['name'] for p in ready)}"
        await asyncio.sleep(0.5)
    return "timed out waiting for the replacement"


async def event_kill(load: Load, target: dict[str, Any]) -> str:
    proc = await asyncio.create_subprocess_exec(
        "ctr",
        "--address",
        load.kube.ctr_address,
        "-n",
        "k8s.io",
        "tasks",
        "kill",
        "-s",
        "SIGKILL",
        target["container"],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    load.event_at = time.monotonic()
    say(
        f"event: SIGKILL to container {target['container'][:12]} of {target['name']} ({target['ip']})"
        " through containerd"
        f" (ctr tasks kill: rc {proc.returncode}{(' ' + out.decode().strip()) if out.strip() else ''})"
    )
    for _ in range(240):
        pods = {p["name"]: p for p in await load.kube.pods()}
        p = pods.get(target["name"])
        if p and p["restarts"] > target["restarts"] and p["ready"]:
            return (
                f"{target['name']} restarted in place (restartCount {target['restarts']} -> {p['restarts']}),"
                f" ready again, same IP {p['ip']}"
            )
        await asyncio.sleep(0.5)
    return "timed out waiting for the restart"


async def cmd_load(kube: Kube, service: str, http: aiohttp.ClientSession, args: argparse.Namespace) -> bool:
    rng = random.Random(args.seed)
    load = Load(kube, service, http, rng)
    load.pods = await kube.pods()
    watcher = asyncio.create_task(load.watch_pods())
    t0 = time.monotonic()
    clients = [asyncio.create_task(load.client(i)) for i in range(args.clients)]
    # The event comes once calls are held: on the pod holding the most, after 3 s, at 10 s at the latest.
    target: dict[str, Any] = {}
    holds_at_event = 0.0
    while True:
        await asyncio.sleep(0.5)
        ready = [p for p in load.pods if p["ready"] and not p["deleting"]]
        counts = {p["name"]: await load.holds_on(p["ip"]) for p in ready}
        if ready:
            target = max(ready, key=lambda p: counts[p["name"]])
            holds_at_event = counts[target["name"]]
        if time.monotonic() - t0 >= 3 and (holds_at_event >= 2 or time.monotonic() - t0 >= 10):
            break
    say(
        f"load: {args.clients} clients for {time.monotonic() - t0:.1f}s before the event; held calls per pod: "
        + ", ".join(f"{k}={v:.0f}" for k, v in counts.items())
    )
    thinking_at_event = set(load.thinking)
    if args.event == "rollout":
        outcome = await event_rollout(load, args.deployment)
    elif args.event == "delete":
        outcome = await event_delete(load, target)
    else:
        outcome = await event_kill(load, target)
    event_done = time.monotonic()
    say(f"event done after {event_done - load.event_at:.1f}s: {outcome}")
    remaining = max(args.seconds - (event_done - t0), 3.0)
    await asyncio.sleep(remaining)
    load.stop_new.set()
    done, pending = await asyncio.wait(clients, timeout=120)
    for task in pending:
        task.cancel()
    watcher.cancel()
    for task in done:
        if task.exception():
            say(f"client crashed: {task.exception()!r}")
    duration = time.monotonic() - t0
    flows = [f for f in load.flows if f.verdict]
    unfinished = [f for f in load.flows if not f.verdict]
    tally = collections.Counter(f.verdict for f in flows)
    across = [f for f in flows if f.started < load.event_at < f.ended]
    held = [f for f in flows if f.ident in thinking_at_event]
    resends: collections.Counter[str] = collections.Counter()
    for f in flows:
        resends.update(f.resends)
    say(
        f"{len(flows)} flows in {duration:.1f}s: right {tally['right']}, wrong {tally['wrong']}, lost {tally['lost']}"
        f"{f', unfinished {len(unfinished)}' if unfinished else ''}"
    )
    say(
        f"across the event: {len(across)} flows in flight when it started, {len(held)} of them held (between rounds);"
        f" {holds_at_event:.0f} calls held on {target.get('name', '?')} just before; of those in flight:"
        f" right {sum(f.verdict == 'right' for f in across)}, wrong {sum(f.verdict == 'wrong' for f in across)},"
        f" lost {sum(f.verdict == 'lost' for f in across)}"
    )
    say(
        f"requests sent {sum(f.sends for f in flows)}, sent again {sum(resends.values())}"
        + (": " + ", ".join(f"{k} x{v}" for k, v in resends.most_common()) if resends else "")
    )
    say(
        "the gateway's counters on the pods running now: "
        + "; ".join([await counters(http, p) for p in await kube.ready_pods()])
    )
    for f in flows:
        if f.verdict in ("wrong", "lost"):
            say(f"{f.verdict.upper()} flow {f.ident} ({f.name}): {f.detail}")
    for f in unfinished:
        say(f"UNFINISHED flow {f.ident} ({f.name})")
    return tally["wrong"] == 0 and tally["lost"] == 0 and not unfinished and tally["right"] > 0 and len(held) > 0


# --- key rotation ------------------------------------------------------------------------------


async def reloaded(kube: Kube, pod: str, count: int, first: str | None) -> str | None:
    """The keys field of the pod's last state_keys_reloaded line, if it lists ``count`` keys, ``first`` first."""
    last = None
    for line in (await kube.logs(pod)).splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == "state_keys_reloaded":
                last = str(entry.get("keys", ""))
    if last is None:
        return None
    ids = [k for k in last.split(",") if k]
    if len(ids) == count and (first is None or ids[0] == first):
        return last
    return None


async def set_keys(kube: Kube, secret: str, keys: list[str]) -> None:
    patch = json.dumps({"stringData": {"keys": "\n".join(keys)}})
    await kube.run("patch", "secret", secret, "--type", "merge", "-p", patch)


async def wait_reload(
    kube: Kube, pods: list[str], count: int, first: str | None, t0: float
) -> tuple[dict[str, float], dict[str, str]]:
    seen: dict[str, float] = {}
    ids: dict[str, str] = {}
    while len(seen) < len(pods) and time.monotonic() - t0 < 180:
        for pod in pods:
            if pod not in seen:
                found = await reloaded(kube, pod, count, first)
                if found:
                    seen[pod], ids[pod] = time.monotonic() - t0, found
        await asyncio.sleep(0.5)
    return seen, ids


async def cmd_rotate(kube: Kube, service: str, http: aiohttp.ClientSession, args: argparse.Namespace) -> bool:
    ok = True
    pods = [p["name"] for p in await kube.ready_pods()]
    old = args.old_key
    new = secrets.token_hex(24)
    name, color = f"rot-{secrets.token_hex(3)}", "amber"
    # A call held since before the rotation: round 1 now (sealed with the old key).
    status, message, _ = await post(http, service + PATH, call_body(1))
    result = message.get("result") or {}
    answers, problem = answers_for(result, name, color)
    if problem:
        say(f"held call: could not start it: HTTP {status} {json.dumps(message)[:200]}")
        return False
    state1 = result.get("requestState")
    say(f"a call is held before the rotation (request 1 -> {status} input_required)")

    t0 = time.monotonic()
    await set_keys(kube, args.secret, [old, new])
    seen, ids = await wait_reload(kube, pods, 2, None, t0)
    for pod in pods:
        say(
            f"step 1 (new key added last): {pod} logged state_keys_reloaded keys={ids.get(pod, '-')} after "
            + (f"{seen[pod]:.1f}s" if pod in seen else "NOT within 180s")
        )
    ok &= len(seen) == len(pods)
    new_id = next(iter(ids.values()), "").split(",")[-1] if ids else None

    status, message, _ = await post(
        http, service + PATH, call_body(2, {"inputResponses": answers, "requestState": state1})
    )
    result = message.get("result") or {}
    answers2, problem = answers_for(result, name, color)
    say(f"held call, request 2 between the steps -> HTTP {status} {problem or 'input_required'}")
    ok &= not problem

    t1 = time.monotonic()
    await set_keys(kube, args.secret, [new, old])
    seen2, ids2 = await wait_reload(kube, pods, 2, new_id, t1)
    for pod in pods:
        say(
            f"step 2 (new key moved first): {pod} logged state_keys_reloaded keys={ids2.get(pod, '-')} after "
            + (f"{seen2[pod]:.1f}s" if pod in seen2 else "NOT within 180s")
        )
    ok &= len(seen2) == len(pods)

    if not problem:
        status, message, _ = await post(
            http, service + PATH, call_body(3, {"inputResponses": answers2, "requestState": result.get("requestState")})
        )
        final = message.get("result") or {}
        text = text_of(final)
        right = text == f"name={name};color={color}"
        say(f"held call finished after the rotation (its state sealed with the old key) -> HTTP {status} {text!r}")
        ok &= right
    live = await kube.ready_pods()
    if len(live) >= 2:
        right, detail = await simple_flow(
            http, [pod_url(live[0]["ip"]), pod_url(live[1]["ip"]), pod_url(live[0]["ip"])], "newkey"
        )
        say(f"a new call sealed with the new key, across both pods: {detail}")
        ok &= right
    slowest = max(list(seen.values()) + list(seen2.values()) or [0])
    say(
        f"rotation: every pod had the new key {max(seen.values() or [0]):.1f}s after step 1 and"
        f" {max(seen2.values() or [0]):.1f}s after step 2 (slowest pod {slowest:.1f}s)"
    )
    return ok


# --- the stdio release ---------------------------------------------------------------------------------


def error_of(message: dict[str, Any]) -> str:
    error = message.get("error") or {}
    data = error.get("data") or {}
    return f"error {error.get('code')} {data.get('reason')}/{data.get('cause')}: {str(error.get('message'))[:120]}"


EVERYTHING_TOOL = "trigger-elicitation-request"


def everything_answers(result: dict[str, Any], name: str) -> tuple[dict[str, Any], bool, str]:
    """Answers to one round of server-everything's trigger-elicitation-request: (answers, whether the
    round holds the elicitation, problem). A new server process asks ``roots/list`` first."""
    answers: dict[str, Any] = {}
    elicits = False
    for key, request in (result.get("inputRequests") or {}).items():
        schema = (request.get("params") or {}).get("requestedSchema") or {}
        if request.get("method") == "roots/list":
            answers[key] = {"roots": []}
        elif request.get("method") == "elicitation/create" and schema.get("required") == ["name"]:
            answers[key] = {"action": "accept", "content": {"name": name}}
            elicits = True
        else:
            return {}, False, f"unexpected input request: {json.dumps(request)[:160]}"
    return answers, elicits, "" if answers else "a round with no input requests"


async def elicitation_hold(http: aiohttp.ClientSession, url: str, ident: int) -> tuple[dict[str, Any], str]:
    """server-everything's trigger-elicitation-request up to its elicitation round: (the retry that
    answers it, '') with the call held meanwhile, else ({}, what came instead)."""
    name = f"Ada-{secrets.token_hex(3)}"
    extra: dict[str, Any] = {}
    for step in range(3):
        status, message, _ = await post(
            http, url, call_body(ident * 10 + step, extra, tool=EVERYTHING_TOOL), tool=EVERYTHING_TOOL
        )
        result = message.get("result")
        if not isinstance(result, dict) or result.get("resultType") != "input_required":
            return {}, f"HTTP {status} {error_of(message) if 'error' in message else json.dumps(result)[:160]}"
        answers, elicits, problem = everything_answers(result, name)
        if problem:
            return {}, problem
        extra = {"inputResponses": answers, "requestState": result.get("requestState")}
        if elicits:
            return extra | {"name": name, "ident": ident}, ""
    return {}, "no elicitation in 3 rounds"


async def finish_elicitation(http: aiohttp.ClientSession, url: str, retry: dict[str, Any]) -> tuple[str, str]:
    """The retry of a held trigger-elicitation-request, and of any ``roots/list`` round the server
    asks after it: ('right' | 'wrong' | 'failed', detail)."""
    extra = {"inputResponses": retry["inputResponses"], "requestState": retry["requestState"]}
    steps: list[str] = []
    for step in range(3):
        status, message, _ = await post(
            http, url, call_body(retry["ident"] * 10 + 5 + step, extra, tool=EVERYTHING_TOOL), tool=EVERYTHING_TOOL
        )
        result = message.get("result")
        if not isinstance(result, dict):
            return "failed", " -> ".join([*steps, f"HTTP {status} {error_of(message)}"])
        if result.get("resultType") == "input_required":
            answers, elicits, problem = everything_answers(result, retry["name"])
            methods = ",".join(r.get("method", "?") for r in (result.get("inputRequests") or {}).values())
            steps.append(f"HTTP {status} input_required({methods})")
            if problem or elicits:
                return "wrong", " -> ".join([*steps, problem or "asked again"])
            extra = {"inputResponses": answers, "requestState": result.get("requestState")}
            continue
        text = text_of(result)
        right = "User provided the requested information" in text and f"- Name: {retry['name']}" in text
        return ("right" if right else "wrong"), " -> ".join([*steps, f"HTTP {status} {text[:80]!r}"])
    return "wrong", " -> ".join([*steps, "no final answer"])


async def cmd_stdio(kube: Kube, service: str, http: aiohttp.ClientSession, path: str) -> bool:
    url = service + path
    word = f"hi from the cluster {secrets.token_hex(3)}"
    extra: dict[str, Any] = {}
    rounds = []
    for step in range(3):  # a new server process asks roots/list before its first call goes on
        body = call_body(1 + step, extra, tool="echo", arguments={"message": word})
        status, message, _ = await post(http, url, body, tool="echo")
        result = message.get("result") or {}
        if result.get("resultType") != "input_required":
            break
        answers, _, problem = everything_answers(result, "")
        rounds.append(",".join(r.get("method", "?") for r in (result.get("inputRequests") or {}).values()))
        if problem or any("roots/list" not in r for r in rounds):
            say(f"echo: {problem or 'a round that is not roots/list'}")
            return False
        extra = {"inputResponses": answers, "requestState": result.get("requestState")}
    echoed = text_of(message.get("result") or {})
    steps = [*(f"input_required({r})" for r in rounds), f"HTTP {status} {echoed!r}"]
    say(f"echo through {url}: {' -> '.join(steps)}" + ("" if "result" in message else f" {error_of(message)}"))
    retry, problem = await elicitation_hold(http, url, 2)
    if problem:
        say(f"trigger-elicitation-request, first request: {problem}")
        return False
    verdict, detail = await finish_elicitation(http, url, retry)
    say(
        f"trigger-elicitation-request: input_required (elicitation/create asking a name)"
        f" -> answered {retry['name']}: {detail}"
    )
    return echoed == f"Echo: {word}" and verdict == "right"


async def cmd_time(kube: Kube, service: str, http: aiohttp.ClientSession, path: str) -> bool:
    tool, url = "get_current_time", service + path
    status, message, _ = await post(http, url, call_body(1, tool=tool, arguments={"timezone": "Etc/UTC"}), tool=tool)
    text = text_of(message.get("result") or {})
    say(
        f"{tool} through {url}: HTTP {status} {text[:120]!r}" + ("" if "result" in message else f" {error_of(message)}")
    )
    return status == 200 and '"timezone": "Etc/UTC"' in text


@dataclass
class Memcg:
    """The gateway container's memory cgroup on this node (cgroup v1, as the kubelet here runs it)."""

    path: str

    @classmethod
    def of(cls, container: str) -> Memcg | None:
        found = glob.glob(f"/sys/fs/cgroup/memory/kubepods/**/{container}", recursive=True)
        return cls(found[0]) if found else None

    def read(self, name: str) -> str:
        with open(f"{self.path}/{name}") as f:
            return f.read()

    def oom_kills(self) -> int:
        fields = dict(line.split() for line in self.read("memory.oom_control").splitlines() if line.strip())
        return int(fields.get("oom_kill", 0))

    def usage_mib(self) -> float:
        return int(self.read("memory.usage_in_bytes")) / 2**20

    def processes(self) -> list[tuple[int, str, int, int]]:
        """(pid, command, oom_score_adj, RSS KiB) of every process in the container."""
        out = []
        for pid in self.read("cgroup.procs").split():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    comm = f.read().strip()
                with open(f"/proc/{pid}/oom_score_adj") as f:
                    adj = int(f.read())
                with open(f"/proc/{pid}/status") as f:
                    rss = next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
            except (OSError, ValueError):
                continue
            out.append((int(pid), comm, adj, rss))
        return out


async def cmd_oom(kube: Kube, service: str, http: aiohttp.ClientSession, args: argparse.Namespace) -> bool:
    """Calls held on the stdio route, one more every 0.3 s, until the container's memory runs out
    (the kernel's OOM killer fired in its cgroup, or the gateway refused a new server for memory),
    with calls held on another route of the same pod meanwhile."""
    (pod,) = await kube.ready_pods()
    memcg = Memcg.of(pod["container"])
    if memcg is None:
        say(f"no memory cgroup found for container {pod['container'][:12]}")
        return False
    limit = int(memcg.read("memory.limit_in_bytes")) / 2**20
    kills_before, restarts_before = memcg.oom_kills(), pod["restarts"]
    gateway = [p for p in memcg.processes() if p[1] != "node"]
    say(
        f"pod {pod['name']}: memory limit {limit:.0f} MiB, in use {memcg.usage_mib():.0f} MiB;"
        f" processes (pid, command, oom_score_adj, RSS KiB): {memcg.processes()}"
    )
    other_url, url = pod_url(pod["ip"], args.other_path), pod_url(pod["ip"], args.path)
    others = []
    for index in range(4):
        name, color = f"other{index}-{secrets.token_hex(3)}", "teal"
        status, message, _ = await post(http, other_url, call_body(100 + index))
        result = message.get("result") or {}
        answers, problem = answers_for(result, name, color)
        if problem:
            say(f"hold {index} on {args.other_path}: HTTP {status} {problem} {error_of(message)}")
            return False
        others.append((name, color, {"inputResponses": answers, "requestState": result.get("requestState")}))
    say(f"{len(others)} calls held on {args.other_path} (ask_two, first round)")
    held: list[dict[str, Any]] = []
    refusals: collections.Counter[str] = collections.Counter()
    after_out = 0
    started = time.monotonic()
    gone = False  # the container's cgroup vanished: its main process, the gateway, was killed
    for ident in range(1000, 1000 + args.max_holds):
        try:
            retry, problem = await elicitation_hold(http, url, ident)
        except (aiohttp.ClientError, TimeoutError, CutShort) as exc:
            retry, problem = {}, type(exc).__name__
        if problem:
            refusals[problem[:90]] += 1
        else:
            held.append(retry)
        try:
            after_out += memcg.oom_kills() > kills_before or any("memory_high" in r for r in refusals)
        except FileNotFoundError:
            gone = True
            break
        if after_out >= 4:
            break
        await asyncio.sleep(0.3)
    took = time.monotonic() - started
    if gone:
        kills = 1
        say(
            f"after {took:.0f}s: {len(held)} stdio calls held, refused {dict(refusals)}; the container's memory"
            " cgroup is gone: the kernel's OOM killer took the gateway"
        )
    else:
        kills = memcg.oom_kills() - kills_before
        procs = memcg.processes()
        say(
            f"after {took:.0f}s: {len(held)} stdio calls held, refused {dict(refusals)};"
            f" kernel OOM kills in the container: {kills}; in use {memcg.usage_mib():.0f} of {limit:.0f} MiB;"
            f" {sum(1 for p in procs if p[1] == 'node')} node processes"
        )
        say(
            f"processes now (pid, command, oom_score_adj, RSS KiB): {[p for p in procs if p[1] != 'node']};"
            f" node processes' oom_score_adj: {sorted({p[2] for p in procs if p[1] == 'node'})}"
        )
        gateway_now = [p[0] for p in procs if p[1] != "node"]
    await asyncio.sleep(2)
    for _ in range(20 if gone else 1):  # a killed container's restart takes the kubelet a moment to report
        (now,) = [p for p in await kube.pods() if p["name"] == pod["name"]] or [{"restarts": -1}]
        if now["restarts"] != restarts_before:
            break
        await asyncio.sleep(1)
    restarted = gone or now["restarts"] != restarts_before
    say(
        f"gateway container restarts: {restarts_before} -> {now['restarts']};"
        f" gateway processes before {[p[0] for p in gateway]}, now {'-' if gone else gateway_now}"
    )
    other_right = 0
    for index, (name, color, extra) in enumerate(others):
        try:
            status, message, _ = await post(http, other_url, call_body(200 + index, extra))
            result = message.get("result") or {}
            answers, problem = answers_for(result, name, color)
            if not problem:
                extra2 = {"inputResponses": answers, "requestState": result.get("requestState")}
                status, message, _ = await post(http, other_url, call_body(300 + index, extra2))
            text = text_of(message.get("result") or {})
            other_right += text == f"name={name};color={color}"
            if text != f"name={name};color={color}":
                say(f"hold {index} on {args.other_path}: HTTP {status} {text!r} {error_of(message)}")
        except (aiohttp.ClientError, TimeoutError, CutShort) as exc:
            say(f"hold {index} on {args.other_path}: {type(exc).__name__}")
    verdicts: collections.Counter[str] = collections.Counter()
    details: collections.Counter[str] = collections.Counter()
    for retry in held:
        try:
            verdict, detail = await finish_elicitation(http, url, retry)
        except (aiohttp.ClientError, TimeoutError, CutShort) as exc:
            verdict, detail = "lost", type(exc).__name__
        verdicts[verdict] += 1
        if verdict != "right":
            details[detail] += 1
    clear = sum(n for d, n in details.items() if "backend_unavailable" in d)
    say(f"{args.other_path} holds finished right: {other_right}/{len(others)}")
    say(f"stdio holds answered: {dict(verdicts)}; not right: {dict(details)}")
    # A new call past the memory is refused by the gateway (503 overloaded, memory_high) or, if the
    # kernel killed its server while it started, fails with backend_unavailable; nothing else.
    odd = {r: n for r, n in refusals.items() if "overloaded/memory_high" not in r and "backend_unavailable" not in r}
    if odd:
        say(f"new calls refused otherwise: {odd}")
    guard = []
    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
        kills_metric = await metric(http, pod["ip"], "mrtr_gateway_stdio_memory_kills_total")
        guard.append(f"stdio_memory_kills_total {kills_metric:.0f}")
        refused = await metric(http, pod["ip"], "mrtr_gateway_requests_total", {"outcome": "error:memory_high"})
        guard.append(f'requests_total{{outcome="error:memory_high"}} {refused:.0f}')
        for kind in ("working_set", "limit"):
            value = await metric(http, pod["ip"], "mrtr_gateway_container_memory_bytes", {"kind": kind})
            guard.append(f"container_memory_bytes{{kind={kind}}} {value / 2**20:.0f} MiB")
    say("the gateway's memory guard: " + "; ".join(guard))
    ran_out = kills > 0 or any("memory_high" in r for r in refusals)
    if not ran_out:
        say("memory never ran out (no kernel OOM kill, no refusal for memory): the test proved nothing")
    return (
        ran_out
        and not restarted
        and not odd
        and other_right == len(others)
        and verdicts["wrong"] == 0
        and verdicts["lost"] == 0
        and verdicts["failed"] == clear
    )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubectl", required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--selector", required=True)
    parser.add_argument("--service", required=True, help="http://<ClusterIP>:<port>")
    parser.add_argument("--ctr-address", default="")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("probes")
    sub.add_parser("flow")
    sub.add_parser("hop")
    load = sub.add_parser("load")
    load.add_argument("--event", choices=["rollout", "delete", "kill"], required=True)
    load.add_argument("--deployment", default="")
    load.add_argument("--clients", type=int, default=12)
    load.add_argument("--seconds", type=float, default=20)
    load.add_argument("--seed", type=int, default=None)
    rotate = sub.add_parser("rotate")
    rotate.add_argument("--secret", required=True)
    rotate.add_argument("--old-key", required=True)
    stdio = sub.add_parser("stdio")
    stdio.add_argument("--path", required=True)
    timed = sub.add_parser("time")
    timed.add_argument("--path", required=True)
    oom = sub.add_parser("oom")
    oom.add_argument("--path", required=True)
    oom.add_argument("--other-path", required=True)
    oom.add_argument("--max-holds", type=int, default=80)
    args = parser.parse_args()
    kube = Kube(args.kubectl, args.kubeconfig, args.namespace, args.selector, args.ctr_address)
    connector = aiohttp.TCPConnector(limit=100, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http:
        if args.command == "probes":
            ok = await cmd_probes(kube, args.service, http)
        elif args.command == "flow":
            ok = await cmd_flow(kube, args.service, http)
        elif args.command == "hop":
            ok = await cmd_hop(kube, args.service, http)
        elif args.command == "load":
            ok = await cmd_load(kube, args.service, http, args)
        elif args.command == "rotate":
            ok = await cmd_rotate(kube, args.service, http, args)
        elif args.command == "stdio":
            ok = await cmd_stdio(kube, args.service, http, args.path)
        elif args.command == "time":
            ok = await cmd_time(kube, args.service, http, args.path)
        else:
            ok = await cmd_oom(kube, args.service, http, args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
