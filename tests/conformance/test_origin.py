"""Origin validation (basic/transports/streamable-http.mdx §Security & Endpoint 1): a present and invalid
Origin MUST get HTTP 403; requests without one are unaffected."""

from __future__ import annotations

import pytest

from conformance.differential import Pair
from conformance.wire import call

pytestmark = pytest.mark.interop

ADD = call("add", {"a": 1, "b": 2})
OK = {"status": 200, "id": "echoed", "resultType": "complete", "serverInfo": True}


@pytest.mark.parametrize(
    ("case", "origin", "expect"),
    [
        ("foreign Origin", "http://attacker.example", {"status": 403}),
        ("foreign Origin on a loopback-looking host name", "http://127.0.0.1.attacker.example", {"status": 403}),
        ("opaque Origin null", "null", {"status": 403}),
        ("loopback Origin", "http://127.0.0.1", OK),
        ("localhost Origin with a port", "http://localhost:3000", OK),
    ],
)
async def test_origin_rule(pair: Pair, case: str, origin: str, expect: dict[str, object]) -> None:
    await pair.check(case, ADD.with_headers(("Origin", origin)), expect)
