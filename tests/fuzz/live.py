"""A gateway and its fake legacy server running on a background event loop, for property-based tests.

Hypothesis drives plain (synchronous) test functions and shrinks failures by re-running them many
times; an event loop per example would cost more than the request. So one loop runs in a thread for
the whole module, the gateway and the backend live on it, and each example submits coroutines to it
with a bounded wait.

The invariants every answer is held to are in :func:`check_answer`: no 5xx, and either exactly one
valid JSON-RPC response (JSON body, or the last message of an SSE stream), a fixed auth refusal, or
an empty body with one of the statuses the front door defines for it.

Example counts: ``MRTR_FUZZ_EXAMPLES=N`` runs N examples per property (the CI-sized default is set
per test); a long run is ``MRTR_FUZZ_EXAMPLES=17000 pytest --timeout=0 tests/fuzz`` (six
properties: more than 100,000 cases in all).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
from aiohttp import web
from fake_backend import start_fake_backend
from hypothesis import HealthCheck, settings
from waiting import eventually

from gateway import keys
from gateway.app import build_app
from gateway.config.load import parse_config

T = TypeVar("T")

EMPTY_STATUSES = frozenset({202, 403, 405, 406, 413, 415})
"""Statuses the front door answers with an empty body (accepted notification, refused origin or hop,
wrong method, Accept, size or media type)."""
AUTH_BODIES = (
    {"error": "invalid_token", "error_description": "A valid bearer token is required"},
    {"error": "forbidden", "error_description": "This endpoint only accepts requests through its proxy"},
)
REQUEST_TIMEOUT = 30.0
FUZZ_KEY = "fuzz-key-0123456789abcdef0123456789abcdef"


def fuzz_settings(default_examples: int) -> settings:
    """CI-sized by default; ``MRTR_FUZZ_EXAMPLES`` overrides the example count of every property."""
    examples = int(os.environ.get("MRTR_FUZZ_EXAMPLES", default_examples))
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        print_blob=True,
    )


_cases: dict[str, int] = {}


def count_case(prop: str) -> None:
    """Count one executed case; with ``MRTR_FUZZ_PROGRESS=<file>`` a long run appends its progress
    there every 1,000 cases (hypothesis itself reports only when a property ends)."""
    _cases[prop] = _cases.get(prop, 0) + 1
    progress = os.environ.get("MRTR_FUZZ_PROGRESS")
    if progress and _cases[prop] % 1000 == 0:
        with open(progress, "a", encoding="utf-8") as out:
            out.write(f"{time.strftime('%H:%M:%S')} {prop} {_cases[prop]}\n")


@dataclass
class Answer:
    status: int
    content_type: str
    raw: bytes
    message: dict[str, Any] | None
    """The JSON-RPC response (or auth refusal body) the answer carries; None for an empty body."""


class ProtocolViolation(AssertionError):
    pass


def _is_response(message: object) -> bool:
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "id" not in message:
        return False
    if ("result" in message) == ("error" in message):
        return False
    if "error" in message:
        error = message["error"]
        return (
            isinstance(error, dict)
            and isinstance(error.get("code"), int)
            and not isinstance(error.get("code"), bool)
            and isinstance(error.get("message"), str)
        )
    return isinstance(message["result"], dict)


def _sse_messages(raw: bytes) -> list[Any]:
    messages = []
    for block in raw.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
        if data:
            messages.append(json.loads("\n".join(data)))
    return messages


def check_answer(status: int, content_type: str, raw: bytes) -> Answer:
    """Every invariant one answer must meet; raises :class:`ProtocolViolation` naming the first broken."""
    if status >= 500:
        raise ProtocolViolation(f"HTTP {status}: {raw[:300]!r}")
    if not raw:
        if status not in EMPTY_STATUSES:
            raise ProtocolViolation(f"empty body with HTTP {status}")
        return Answer(status, content_type, raw, None)
    if content_type == "text/event-stream":
        messages = _sse_messages(raw)
        responses = [m for m in messages if isinstance(m, dict) and ("result" in m or "error" in m)]
        if len(responses) != 1 or not _is_response(messages[-1]):
            raise ProtocolViolation(f"SSE stream without exactly one final response: {raw[:300]!r}")
        return Answer(status, content_type, raw, messages[-1])
    if content_type != "application/json":
        raise ProtocolViolation(f"unexpected content type {content_type!r} with HTTP {status}")
    message = json.loads(raw)
    if status in (401, 403) and message in AUTH_BODIES:
        return Answer(status, content_type, raw, message)
    if not _is_response(message):
        raise ProtocolViolation(f"not one JSON-RPC response (HTTP {status}): {raw[:300]!r}")
    return Answer(status, content_type, raw, message)


class LiveGateway:
    """The gateway (+ fake legacy server) on a loop in a background thread."""

    def __init__(self, routes: list[dict[str, Any]], **config: Any) -> None:
        self._routes = routes
        self._config = config
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fuzz-loop", daemon=True)
        self._runners: list[web.AppRunner] = []
        self.app: web.Application | None = None
        self.base = ""
        self.backend_url = ""
        self.http: aiohttp.ClientSession | None = None

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def __enter__(self) -> LiveGateway:
        self._thread.start()
        self.run(self._start())
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.run(self._stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()

    async def _start(self) -> None:
        backend_runner, self.backend_url = await start_fake_backend()
        self._runners.append(backend_runner)
        routes = [
            {**r, "backend": {"url": self.backend_url, "timeout": 10, **r.get("backend", {})}} for r in self._routes
        ]
        data = {
            "state": {"keys": ["fuzz-key-0123456789abcdef0123456789abcdef"]},
            "replica_id": "fuzz",
            "routes": routes,
        }
        self.app = build_app(parse_config({**data, **self._config}, env={}))
        runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=5, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runners.insert(0, runner)
        self.base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT))

    async def _stop(self) -> None:
        if self.http is not None:
            await self.http.close()
        for runner in self._runners:
            await runner.cleanup()

    # -- requests ---------------------------------------------------------------------------------

    async def _send(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Answer:
        assert self.http is not None
        async with self.http.request(
            method, self.base + path, headers=dict(headers), data=body, skip_auto_headers={"Content-Type"}
        ) as resp:
            raw = await resp.read()
            return check_answer(resp.status, resp.content_type, raw)

    def send(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Answer:
        return self.run(self._send(method, path, headers, body), timeout=REQUEST_TIMEOUT + 5)

    # -- what the gateway holds -------------------------------------------------------------------

    @property
    def holds(self) -> int:
        assert self.app is not None
        return len(self.app[keys.HOLDS])

    def leased(self) -> int:
        assert self.app is not None
        return sum(r.pool.leased_count for r in self.app[keys.ROUTES].values())

    def wait_for_baseline(self, timeout: float = 20.0) -> None:
        """Holds and leased backend sessions back to zero within ``timeout`` (the holds' TTL is short)."""

        async def settled() -> None:
            await eventually(
                lambda: not (self.holds or self.leased()),
                what="no hold and no leased backend session",
                timeout=timeout,
                interval=0.05,
            )

        self.run(settled(), timeout=timeout + 5)

    def expire_all(self) -> None:
        """Expire every hold now (as its TTL would) and wait until the backend sessions are released,
        so that a failing example cannot leak state into the next one."""
        assert self.app is not None
        registry = self.app[keys.HOLDS]
        self.loop.call_soon_threadsafe(registry.reap, float("inf"))
        self.wait_for_baseline(timeout=20)
