"""The arguments digest (a canonical JSON encoding and SHA-256 of every argument) is computed only
where a requestState is bound: once when a call's hold is created, once when a retry's state is
opened, and never for a plain call, whose arguments may be MiB-sized."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest
from fake_backend import FakeBackend
from harness import BareClient, accept, route, running_gateway

from gateway.state import claims

Backend = tuple[FakeBackend, str]


@pytest.fixture
def digests(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes (in characters of text) of the arguments digested, in order."""
    seen: list[int] = []
    real = claims.args_digest

    def counting(arguments: Mapping[str, Any] | None) -> str:
        seen.append(len(str(arguments)))
        return real(arguments)

    monkeypatch.setattr(claims, "args_digest", counting)
    return seen


async def test_a_plain_call_with_a_megabyte_argument_is_not_digested(
    fake_backend: Backend, http: aiohttp.ClientSession, digests: list[int]
) -> None:
    _, url = fake_backend
    text = "x" * 1_000_000  # the whole body stays under aiohttp's 1 MiB raw-bytes warning
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        reply = await BareClient(http, gw.url()).call_tool("echo", {"text": text})
    assert reply.status == 200
    assert reply.text == text
    assert digests == []


async def test_a_two_round_call_digests_once_per_bound_state(
    fake_backend: Backend, http: aiohttp.ClientSession, digests: list[int]
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        first = (await client.call_tool("ask_city")).result
        assert len(digests) == 1, "the hold binds the arguments once"
        (key,) = first["inputRequests"]
        done = await client.retry("ask_city", first["requestState"], {key: accept(city="Oslo")})
    assert done.text == "city=Oslo"
    assert len(digests) == 2, "the retry's state is checked against one digest"
