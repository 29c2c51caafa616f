"""Input rounds: the two-round MRTR flow through the gateway vs the native mcp 2.3.0 server
(both on default settings, interleaved), and a burst of 300 concurrent interactive flows.

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

from bench.harness import Legacy, Modern, summary

BURST = 300


async def two_round(
    gateway: Modern,
    native: Modern,
    runs: int,
    legacy: Legacy | None = None,
    legacy_hop: Legacy | None = None,
    warmup: int = 10,
) -> dict[str, Any]:
    """Interleaved samples of the flow through the gateway, on the native server and (when given)
    spoken directly to the legacy backend the gateway translates - the floor the backend sets - and
    to the same backend through the bare forwarding hop: the floor any proxy in front of that
    backend sets (the hop carries the same two client requests, and streams the call's SSE answer).

    ``hop_overhead_ratio`` is the pass-through figure's ratio for this flow: (gateway - legacy
    direct) / (hop - legacy direct)."""
    paths: dict[str, Modern | Legacy] = {"gateway": gateway, "native": native}
    if legacy is not None:
        paths["legacy_direct"] = legacy
    if legacy_hop is not None:
        paths["legacy_hop"] = legacy_hop
    names = list(paths)
    samples: dict[str, list[float]] = {p: [] for p in names}
    for i in range(warmup + runs):
        k = i % len(names)
        for path in names[k:] + names[:k]:
            started = time.perf_counter()
            await paths[path].round_trip()
            if i >= warmup:
                samples[path].append((time.perf_counter() - started) * 1000)
    out: dict[str, Any] = {p: summary(s) for p, s in samples.items()}
    out["ratio"] = round(out["gateway"]["median_ms"] / out["native"]["median_ms"], 2)
    line = (
        f"  gateway {out['gateway']['median_ms']:.2f} ms (p99 {out['gateway']['p99_ms']:.2f})"
        f"  native {out['native']['median_ms']:.2f} ms (p99 {out['native']['p99_ms']:.2f})  ratio {out['ratio']}"
    )
    if legacy is not None:
        floor = out["legacy_direct"]["median_ms"]
        out["legacy_direct_ratio"] = round(floor / out["native"]["median_ms"], 2)
        line += f"  legacy direct {floor:.2f} ms ({out['legacy_direct_ratio']}x native)"
        if legacy_hop is not None:
            hop = out["legacy_hop"]["median_ms"]
            out["legacy_hop_ratio"] = round(hop / out["native"]["median_ms"], 2)
            spread = hop - floor
            out["hop_overhead_ratio"] = round((out["gateway"]["median_ms"] - floor) / spread, 2) if spread > 0 else None
            line += (
                f"  legacy via hop {hop:.2f} ms ({out['legacy_hop_ratio']}x native;"
                f" gateway overhead / hop overhead {out['hop_overhead_ratio']})"
            )
    print(line)
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
