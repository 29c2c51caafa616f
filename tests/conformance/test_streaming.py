"""Request-scoped notifications on a request's own response stream (basic/transports/streamable-http.mdx
§Receiving Messages; basic/patterns/progress.mdx; server/utilities/logging.mdx): progress only for a
request that carries a progressToken, log messages only for one that asks for a level, both before the
final response, which ends the stream."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.differential import Pair
from conformance.wire import LOG_LEVEL, Observed, call

pytestmark = pytest.mark.interop

COMPLETE = {"status": 200, "id": "echoed", "resultType": "complete", "serverInfo": True}


def notifications(observed: Observed) -> dict[str, Any]:
    before = observed.messages[:-1]
    return {
        "notifications": [m.get("method") for m in before],
        "progressTokens": sorted(
            {str(m["params"].get("progressToken")) for m in before if m.get("method") == "notifications/progress"}
        ),
        "responseLast": bool(observed.messages) and "id" in observed.messages[-1],
    }


@pytest.mark.parametrize(
    ("case", "meta", "expected"),
    [
        ("no progress token, no log level: no notifications", {}, []),
        ("progress token: progress only", {"progressToken": "p-1"}, ["notifications/progress"] * 2),
        ("log level: log messages only", {LOG_LEVEL: "info"}, ["notifications/message"] * 2),
        (
            "progress token and log level: both, in order",
            {"progressToken": "p-1", LOG_LEVEL: "info"},
            ["notifications/progress", "notifications/message"] * 2,
        ),
        ("log level above the messages' level: none", {LOG_LEVEL: "error"}, []),
    ],
)
async def test_request_scoped_notifications(pair: Pair, case: str, meta: dict[str, Any], expected: list[str]) -> None:
    tokens = ["p-1"] if "progressToken" in meta else []
    expect = {**COMPLETE, "notifications": expected, "progressTokens": tokens, "responseLast": True}
    _, gateway = await pair.check(case, call("count", {"n": 2}, meta=meta), expect, extra=notifications)
    if gateway.content_type == "text/event-stream":
        # SHOULD (§Receiving Messages): tell buffering proxies to pass events through at once.
        assert gateway.headers.get("X-Accel-Buffering") == "no"
