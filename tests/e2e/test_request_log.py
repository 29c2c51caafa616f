"""One canonical log line and one latency observation per response, never a secret (issue 11 item 3).

Extends the bounded-log-lines test of the front door (test_frontdoor_hardening.py): the request
middleware writes one ``request`` line for every response — a call's rounds, a rejection, an
Origin 403 — with the fields an operator joins and filters on, and none of what a client must be
able to trust the gateway with (its credential, its requestState, its answers).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
import pytest
import structlog
from fake_backend import FakeBackend
from harness import BareClient, accept, route, running_gateway, running_replicas
from mcp_types.jsonrpc import METHOD_NOT_FOUND

from gateway import keys
from gateway.observability import requests
from gateway.observability.logging import configure_logging
from gateway.observability.requests import hold_digest

Backend = tuple[FakeBackend, str]
SECRET_TOKEN = "Bearer sekrit-credential-7f3a9c"
SECRET_ANSWER = "Atlantis-only-the-user-knows"


@contextmanager
def json_logs() -> Iterator[None]:
    """JSON lines to the stderr of this moment (capsys's, once the test runs)."""
    configure_logging("info", json_logs=True)
    try:
        yield
    finally:
        structlog.reset_defaults()


def _request_lines(text: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == "request"]


def _latency_samples(gw: Any) -> float:
    (histogram,) = gw.app[keys.METRICS].request_seconds.collect()
    return float(sum(s.value for s in histogram.samples if s.name.endswith("_count")))


async def test_every_response_gets_one_line_and_one_latency_sample_and_no_secret(
    fake_backend: Backend, http: aiohttp.ClientSession, capsys: pytest.CaptureFixture[str]
) -> None:
    _, url = fake_backend
    with json_logs():
        async with running_gateway([route("demo", "/mcp", url)]) as gw:
            client = BareClient(http, gw.url(), authorization=SECRET_TOKEN)
            capsys.readouterr()
            first = (await client.call_tool("ask_city")).result
            (key,) = first["inputRequests"]
            done = await client.retry("ask_city", first["requestState"], {key: accept(city=SECRET_ANSWER)})
            assert done.text == f"city={SECRET_ANSWER}"
            unknown = await client.request("no/such_method")
            assert unknown.error["code"] == METHOD_NOT_FOUND
            async with http.post(gw.url(), data=b"{}", headers={"Origin": "https://evil.example"}) as refused:
                assert refused.status == 403
            samples = _latency_samples(gw)
            assert len(gw.app[keys.HOLDS]) == 0
        logged = capsys.readouterr()
    text = logged.out + logged.err
    lines = _request_lines(text)
    assert len(lines) == 4, lines
    assert samples == 4, "one latency observation per response"

    asked, answered, not_found, origin = lines
    assert {line["replica"] for line in lines} == {"test-replica"}
    assert len({line["request_id"] for line in lines}) == 4
    assert (asked["route"], asked["rpc_method"], asked["target"]) == ("demo", "tools/call", "ask_city")
    assert (asked["outcome"], asked["status"], asked["round"]) == ("input_required", 200, 1)
    assert (answered["outcome"], answered["status"], answered["round"]) == ("complete", 200, 2)
    assert asked["hold"] == answered["hold"], "the rounds of one call join on the hold digest"
    assert asked["hold"] != hold_digest(asked["hold"])
    assert (not_found["outcome"], not_found["error_code"], not_found["status"]) == ("rejected", METHOD_NOT_FOUND, 404)
    assert (origin["outcome"], origin["reason"], origin["status"]) == ("rejected", "origin", 403)
    assert all(isinstance(line["duration_ms"], int | float) for line in lines)

    assert "sekrit-credential" not in text
    assert SECRET_ANSWER not in text
    assert first["requestState"] not in text
    assert first["requestState"][:40] not in text


class _Recorder:
    """Stands in for the middleware's logger: keeps the lines and signals each one."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.written = asyncio.Event()

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append({"event": event, **fields})
        self.written.set()

    debug = info


async def test_a_client_that_goes_away_is_logged_once_as_disconnected(
    fake_backend: Backend, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = fake_backend
    recorder = _Recorder()
    monkeypatch.setattr(requests, "log", recorder)
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        with pytest.raises(TimeoutError):
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.5)) as impatient:
                await BareClient(impatient, gw.url()).call_tool("slow", {"seconds": 30})
        async with asyncio.timeout(10):
            await recorder.written.wait()
        samples = _latency_samples(gw)
    (line,) = recorder.lines
    assert (line["event"], line["target"], line["outcome"], line["status"]) == (
        "request",
        "slow",
        "client_disconnected",
        requests.CLIENT_CLOSED_REQUEST,
    )
    assert samples == 1


async def test_forwarded_hops_and_old_clients_get_their_line_too(
    fake_backend: Backend, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = fake_backend
    recorder = _Recorder()
    monkeypatch.setattr(requests, "log", recorder)
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        done = await BareClient(http, b.url()).retry("ask_city", first["requestState"], {key: accept(city="Oslo")})
        assert done.text == "city=Oslo"
        handshake = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "old", "version": "0"},
            },
        }
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        async with http.post(a.url(), data=json.dumps(handshake), headers=headers) as resp:
            assert resp.status == 200
            await resp.read()
    lines = [line for line in recorder.lines if line["event"] == "request"]
    asked, owner, hop, old = lines
    assert (asked["replica"], asked["outcome"]) == ("replica-0", "input_required")
    assert (owner["replica"], owner["outcome"], owner.get("forwarded")) == ("replica-0", "complete", True)
    assert (hop["replica"], hop["outcome"], hop["backend_status"]) == ("replica-1", "forwarded", 200)
    assert asked["hold"] == owner["hold"] == hop["hold"], "one call, one hold digest, on both replicas"
    assert (old["outcome"], old["era"], old["rpc_method"], old["backend_status"]) == (
        "legacy_passthrough",
        "legacy",
        "initialize",
        200,
    )
