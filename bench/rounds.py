"""Input rounds: interactive MRTR flows (one question; two dependent questions) through the gateway
vs the native mcp 2.3.0 server and vs the same legacy backend's own inline flow, directly and
through the bare hop (all on default settings, interleaved), and a burst of 300 concurrent
interactive flows.

The burst: 300 clients start ``ask_city`` at once and each retries with its answer as soon as its
InputRequiredResult arrives. Every first call leases a backend session exclusively (it may be
held), so past ``max_sessions`` (256 by default) the pool must either make a call wait for a
session another flow is about to free or refuse it (503 + Retry-After). The count of refusals is
the figure.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.harness import Legacy, Modern, cpu_seconds, summary

BURST = 300


FLOWS: dict[str, dict[str, Any]] = {
    # flow -> the legacy backend's tool, the native server's, each one's final text, input rounds
    "ask_city": {"legacy": "ask_city", "native": "ask_city", "expect": "city=Paris", "native_expect": "city=Paris"},
    "book_table": {
        "legacy": "book_table",
        "native": "ask_two",
        "expect": "booked=friday 20:00",
        "native_expect": "name=alice;color=blue",
        "rounds": 2,
    },
}
"""``ask_city``: one question, two 2026-07-28 requests. ``book_table``: two dependent questions (the
second quotes the first answer), so two input rounds and three requests; on the native server the
same shape is its ``ask_two``."""


def _ratios(out: dict[str, Any]) -> str:
    """Ratios of one flow's medians, added to ``out``; the line that prints them."""
    med = {p: out[p]["median_ms"] for p in ("gateway", "native", "legacy_direct", "legacy_hop") if p in out}
    out["ratio"] = round(med["gateway"] / med["native"], 2)
    line = (
        f"gateway {med['gateway']:.2f} ms (p99 {out['gateway']['p99_ms']:.2f})"
        f"  native {med['native']:.2f} ms (p99 {out['native']['p99_ms']:.2f})  gateway/native {out['ratio']}"
    )
    if "legacy_direct" in med:
        floor = med["legacy_direct"]
        out["legacy_direct_ratio"] = round(floor / med["native"], 2)
        line += f"\n      legacy inline direct {floor:.2f} ms (p99 {out['legacy_direct']['p99_ms']:.2f})"
    if "legacy_hop" in med:
        hop = med["legacy_hop"]
        out["legacy_hop_ratio"] = round(hop / med["native"], 2)
        out["hop_flow_ratio"] = round(med["gateway"] / hop, 2)
        spread = hop - med["legacy_direct"]
        out["hop_overhead_ratio"] = round((med["gateway"] - med["legacy_direct"]) / spread, 2) if spread > 0 else None
        line += (
            f"  via hop {hop:.2f} ms (p99 {out['legacy_hop']['p99_ms']:.2f})"
            f"  (gateway - direct) / (hop - direct) {out['hop_overhead_ratio']}  gateway / hop {out['hop_flow_ratio']}"
        )
    return line


async def two_round(
    gateway: Modern,
    native: Modern,
    runs: int,
    legacy: Legacy | None = None,
    legacy_hop: Legacy | None = None,
    warmup: int = 10,
    pids: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Interleaved samples of the interactive flows (:data:`FLOWS`) through the gateway, on the
    native server and (when given) spoken by an inline handshake-era client directly to the legacy
    backend the gateway translates - the floor the backend sets - and to the same backend through
    the bare forwarding hop: the floor any proxy in front of that backend sets (the backend gets the
    same requests as from the gateway: the call and one answer per question; the hop adds one proxy
    hop per HTTP exchange). Every sample runs every (flow, path) once, in a rotating order.

    Per flow: ``ratio`` = gateway / native; ``hop_overhead_ratio`` = (gateway - legacy direct) /
    (hop - legacy direct), the pass-through figure's ratio for this flow; ``hop_flow_ratio`` =
    gateway / hop. ``ask_city``'s figures stay at the top level (earlier reports' layout), each
    other flow's are under its name. ``pids`` (``gateway``, ``legacy_hop``: path -> process): their
    CPU per flow afterwards (:func:`_cpu_per_flow`)."""
    paths: dict[str, Modern | Legacy] = {"gateway": gateway, "native": native}
    if legacy is not None:
        paths["legacy_direct"] = legacy
    if legacy_hop is not None:
        paths["legacy_hop"] = legacy_hop
    runs_of = [(flow, path) for flow in FLOWS for path in paths]
    samples: dict[tuple[str, str], list[float]] = {k: [] for k in runs_of}
    for i in range(warmup + runs):
        k = i % len(runs_of)
        for flow, path in runs_of[k:] + runs_of[:k]:
            spec = FLOWS[flow]
            native_side = path == "native"
            started = time.perf_counter()
            await paths[path].round_trip(
                spec["native" if native_side else "legacy"],
                spec["native_expect" if native_side else "expect"],
                spec.get("rounds", 1),
            )
            if i >= warmup:
                samples[(flow, path)].append((time.perf_counter() - started) * 1000)
    out: dict[str, Any] = {}
    for flow in FLOWS:
        figures: dict[str, Any] = {p: summary(samples[(flow, p)]) for p in paths}
        line = _ratios(figures)
        if flow == "ask_city":
            out.update(figures)
        else:
            out[flow] = figures
        print(f"  {flow}: {line}")
    if pids:
        out["cpu_ms_per_flow"] = await _cpu_per_flow(paths, pids, max(runs, 40))
    return out


async def _cpu_per_flow(paths: dict[str, Modern | Legacy], pids: dict[str, int], flows: int) -> dict[str, Any]:
    """CPU time per flow of the proxy processes (``pids``: path -> pid; ``gateway`` and
    ``legacy_hop``), from ``flows`` sequential flows of each kind on that path alone (each process
    serves only its own path, so its CPU over the loop is that flow's)."""
    out: dict[str, Any] = {"flows": flows}
    for flow, spec in FLOWS.items():
        out[flow] = {}
        for path, pid in pids.items():
            before = cpu_seconds(pid)
            for _ in range(flows):
                await paths[path].round_trip(spec["legacy"], spec["expect"], spec.get("rounds", 1))
            out[flow][path] = round((cpu_seconds(pid) - before) * 1000 / flows, 3)
        if out[flow].get("legacy_hop"):
            out[flow]["ratio"] = round(out[flow]["gateway"] / out[flow]["legacy_hop"], 2)
        print(f"  {flow}: CPU per flow, ms: {out[flow]}")
    return out


async def burst(gateway: Modern, size: int = BURST) -> dict[str, Any]:
    """``size`` concurrent two-round flows; how many first calls were refused, and how long it took."""
    refused = 0
    failed = 0

    async def flow() -> None:
        nonlocal refused, failed
        status, message = await gateway.post(gateway.body("ask_city", {}))
        if status == 503:
            refused += 1
            return
        if status != 200 or message is None or "result" not in message:
            failed += 1
            return
        first = message["result"]
        answers = {k: {"action": "accept", "content": {"city": "Paris"}} for k in first["inputRequests"]}
        await gateway.call("ask_city", {}, {"inputResponses": answers, "requestState": first["requestState"]})

    started = time.perf_counter()
    await asyncio.gather(*(flow() for _ in range(size)))
    elapsed = time.perf_counter() - started
    out = {"flows": size, "refused": refused, "failed": failed, "seconds": round(elapsed, 2)}
    print(f"  {size} concurrent interactive flows: {refused} refused, {failed} failed, {elapsed:.2f} s")
    return out
