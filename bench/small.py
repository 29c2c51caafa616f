"""The two small figures: ``requestState`` seal + unseal time (in process, the gateway's own codec),
and the stdio route's first burst (64 concurrent cold calls to a route whose server is a process
per backend session)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.harness import Modern


def codec(iterations: int) -> dict[str, Any]:
    """Median and p99 µs of one seal and one unseal of a typical first-round state, over ``iterations``.

    The headline figure seals the same claims it always has (no ``extra``), so runs of different
    releases compare. ``with_extra`` repeats the measurement with the ``extra`` every real round
    carries (the sealing process's boot id and the call's deadline, as
    :meth:`~gateway.state.boundary.RequestStateBoundary.seal` writes them).
    """
    import os

    from gateway.state.claims import Claims
    from gateway.state.codec import KeyRing

    ring = KeyRing([b"bench-key-0123456789abcdef0123456789abcdef"])
    now = int(time.time())
    claims = Claims(
        iat=now,
        exp=now + 300,
        aud="bench",
        method="tools/call",
        target="ask_city",
        args_digest="3q2-7w3q2-7w3q2-7w3q2w",
        principal=None,
        hold_id="JFk5ScukV2MbSDVX",
        round=1,
        owner="replica-0123456789",
        extra={},
    )
    out = _seal_unseal(ring, claims, iterations)
    with_extra = Claims(**{**_fields(claims), "extra": {"boot": "Zm9vYmFyYmF6cXV4", "until": now + 600}})
    out["with_extra"] = _seal_unseal(ring, with_extra, iterations)
    out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print(
        f"  seal {out['seal_us']} µs + unseal {out['unseal_us']} µs = {out['seal_plus_unseal_us']} µs "
        f"(p99 {out['seal_p99_us']} + {out['unseal_p99_us']}; with the usual extra: "
        f"{out['with_extra']['seal_plus_unseal_us']} µs; load {out['loadavg'][0]})"
    )
    return out


def _fields(claims: Any) -> dict[str, Any]:
    import dataclasses

    return {field.name: getattr(claims, field.name) for field in dataclasses.fields(claims)}


def _seal_unseal(ring: Any, claims: Any, iterations: int) -> dict[str, Any]:
    """Each sample times one ``seal`` and the ``unseal`` of its token, each between two clock reads.

    Only the calls are inside the windows: the clock is looked up once, and both samples are
    recorded after the last read (recording the seal's sample between the unseal and its closing
    read used to charge a float operation and a list append, with its occasional resize, to unseal).
    What unseal returns is dropped inside its window, so freeing the claims still counts.
    """
    clock = time.perf_counter
    token = ring.seal(claims)
    for _ in range(200):  # warm-up
        ring.unseal(ring.seal(claims))
    seal: list[float] = []
    unseal: list[float] = []
    for _ in range(iterations):
        started = clock()
        token = ring.seal(claims)
        sealed = clock()
        ring.unseal(token)
        ended = clock()
        seal.append((sealed - started) * 1e6)
        unseal.append((ended - sealed) * 1e6)
    seal.sort()
    unseal.sort()
    p99 = min(iterations - 1, iterations * 99 // 100)
    out: dict[str, Any] = {
        "iterations": iterations,
        "seal_us": round(seal[len(seal) // 2], 2),
        "unseal_us": round(unseal[len(unseal) // 2], 2),
        "seal_p99_us": round(seal[p99], 2),
        "unseal_p99_us": round(unseal[p99], 2),
        "token_chars": len(token),
    }
    out["seal_plus_unseal_us"] = round(out["seal_us"] + out["unseal_us"], 2)
    return out


async def stdio_burst(gateway: Modern, calls: int = 64) -> dict[str, Any]:
    """``calls`` concurrent ``add`` calls on a stdio route nobody has used yet: time until all are served."""
    started = time.perf_counter()
    results = await asyncio.gather(*(gateway.call("add", {"a": i, "b": 1}) for i in range(calls)))
    elapsed = time.perf_counter() - started
    assert [r["content"][0]["text"] for r in results] == [str(i + 1) for i in range(calls)]
    out = {"calls": calls, "seconds": round(elapsed, 2)}
    print(f"  {calls} concurrent cold stdio calls served in {elapsed:.2f} s")
    return out


if __name__ == "__main__":
    # ``python -m bench.small N``: the codec figure as JSON, measured in this interpreter (the suite
    # runs it with the gateway under test first on PYTHONPATH).
    import json
    import sys

    print(json.dumps(codec(int(sys.argv[1]))))
