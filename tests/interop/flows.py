"""Client-side flow helpers shared by the interop tests: deterministic callbacks that record
what the server asked, and a way to count the tools/call POSTs (rounds) a flow took."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientRequestContext

FLOW_TIMEOUT = 20.0
"""Bound on one whole client flow (connect, call, every round)."""

ANSWERS = {"city": "Paris", "name": "Ann", "color": "teal"}
SAMPLED_TEXT = "a short summary"
ROOTS = ("file:///tmp/project-a", "file:///tmp/project-b")
LEGACY_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"


@dataclass
class Recorder:
    """Client callbacks that answer deterministically and record every invocation."""

    elicit_action: str = "accept"
    rendezvous: bool = False
    """When set, the elicitation and sampling callbacks each wait for the other to start, so a
    flow only completes if both requests were outstanding at the same time."""
    elicitations: list[str] = field(default_factory=list)
    samplings: list[str] = field(default_factory=list)
    roots_calls: int = 0
    _elicit_started: anyio.Event = field(default_factory=anyio.Event)
    _sample_started: anyio.Event = field(default_factory=anyio.Event)

    async def elicit(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.elicitations.append(params.message)
        if self.rendezvous:
            self._elicit_started.set()
            await self._sample_started.wait()
        if self.elicit_action != "accept":
            return types.ElicitResult(action=self.elicit_action)
        (wanted,) = params.requested_schema["properties"]
        return types.ElicitResult(action="accept", content={wanted: ANSWERS[wanted]})

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        (message,) = params.messages
        assert isinstance(message.content, types.TextContent)
        self.samplings.append(message.content.text)
        if self.rendezvous:
            self._sample_started.set()
            await self._elicit_started.wait()
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=SAMPLED_TEXT), model="test-model"
        )

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.roots_calls += 1
        return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in ROOTS])

    def counts(self) -> tuple[int, int, int]:
        """(elicitations, samplings, roots/list) invocations so far."""
        return len(self.elicitations), len(self.samplings), self.roots_calls


@dataclass
class WireLog:
    """Counts the JSON-RPC requests an SDK client POSTs, by method (rounds = tools/call POSTs)."""

    methods: list[str] = field(default_factory=list)

    async def on_request(self, request: httpx2.Request) -> None:
        if request.method != "POST":
            return
        try:
            body = json.loads(request.content)
        except ValueError:
            return
        if isinstance(body, dict) and isinstance(body.get("method"), str):
            self.methods.append(body["method"])

    def count(self, method: str) -> int:
        return self.methods.count(method)

    def client(self, headers: dict[str, str] | None = None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(30, read=300),
            event_hooks={"request": [self.on_request]},
        )


def text_of(result: Any) -> str:
    assert not result.is_error, result.content
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text
