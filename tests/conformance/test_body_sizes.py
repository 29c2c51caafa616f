"""Request bodies of any size up to the limit are served, one byte more is HTTP 413 (RFC 9110 §15.5.14;
the spec sets no limit of its own, both servers default to 4 MiB)."""

from __future__ import annotations

import json

import pytest

from conformance.differential import Pair
from conformance.wire import Exchange, call

pytestmark = pytest.mark.interop

OK = {"status": 200, "body": "jsonrpc", "id": "echoed", "resultType": "complete", "serverInfo": True}


# --- body sizes ------------------------------------------------------------------------------

LIMIT = 4 * 1024 * 1024
"""Both servers accept request bodies up to 4 MiB (the gateway's listen.max_body_bytes default and the
reference's max_request_body_size default)."""


def echo_of_size(size: int) -> Exchange:
    """An ``echo`` call whose body is exactly ``size`` bytes."""
    base = call("echo", {"text": ""})
    padding = size - len(base.body)
    assert padding >= 0
    message = json.loads(base.body)
    message["params"]["arguments"]["text"] = "x" * padding
    body = json.dumps(message).encode()
    assert len(body) == size
    return base.with_body(body)


@pytest.mark.parametrize(
    ("case", "size"),
    [
        ("body of 256 KiB", 256 * 1024),
        ("body of 1 MiB", 1024 * 1024),
        ("body of 3 MiB", 3 * 1024 * 1024),
        ("body at the limit", LIMIT),
    ],
)
async def test_bodies_up_to_the_limit_are_served(pair: Pair, case: str, size: int) -> None:
    reference, gateway = await pair.check(case, echo_of_size(size), OK)
    for observed in (reference, gateway):
        assert len(observed.result["content"][0]["text"]) == size - len(call("echo", {"text": ""}).body)


async def test_body_one_byte_over_the_limit_is_413(pair: Pair) -> None:
    await pair.check("body one byte over the limit", echo_of_size(LIMIT + 1), {"status": 413})
