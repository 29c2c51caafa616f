"""One trace from the official SDK client, through the gateway's rounds, to the legacy backend, as an
OpenTelemetry collector receives it: the real OTLP/HTTP exporter (set up from ``OTEL_*`` variables,
as ``mrtr-gateway serve`` does) posts to a small in-process receiver (``POST /v1/traces``, parsed with
``opentelemetry-proto``).

The client is mcp 2.3.0's ``Client(url, mode="2026-07-28")``: it injects the current context into
``params._meta`` of each request it sends (SEP-414; ``mcp.shared._otel.inject_trace_context``), so
the test only makes its own "agent" span current around the call.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from fake_backend import FakeBackend
from harness import route, running_gateway, serving
from mcp import types
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from gateway.observability import tracing

Backend = tuple[FakeBackend, str]


class Received:
    """What the receiver got: (service.name, span) for every span of every export."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, ProtoSpan]] = []

    async def traces(self, request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        export = ExportTraceServiceRequest.FromString(await request.read())
        for resource_spans in export.resource_spans:
            service = next(a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name")
            for scope in resource_spans.scope_spans:
                self.spans.extend((service, span) for span in scope.spans)
        return web.Response(content_type="application/x-protobuf", body=b"")

    def of(self, service: str) -> list[ProtoSpan]:
        return [span for name, span in self.spans if name == service]


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Received, str]]:
    received = Received()
    app = web.Application()
    app.router.add_post("/v1/traces", received.traces)
    async with serving(app) as base:
        yield received, base + "/v1/traces"


def _attributes(span: ProtoSpan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in span.attributes:
        kind = a.value.WhichOneof("value")
        out[a.key] = getattr(a.value, kind) if kind else None
    return out


async def test_one_trace_from_the_sdk_client_through_two_rounds_to_the_backend(
    fake_backend: Backend, receiver: tuple[Received, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp.client import Client

    backend, url = fake_backend
    received, endpoint = receiver
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    assert tracing.setup_from_env(os.environ)
    agent = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    agent.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint), schedule_delay_millis=50))

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        (wanted,) = params.requested_schema["properties"]
        return types.ElicitResult(action="accept", content={wanted: f"{wanted}-given"})

    try:
        async with running_gateway([route("demo", "/mcp", url)]) as gw:
            with agent.get_tracer("test").start_as_current_span("agent turn") as turn:
                async with Client(gw.url(), mode="2026-07-28", elicitation_callback=elicit) as client:
                    result = await client.call_tool("ask_two", {})
        assert result.content[0].text == "name=name-given;color=color-given"  # type: ignore[union-attr]
    finally:
        # Both exporters post from their worker threads to the receiver on this loop: flush off-loop.
        await asyncio.to_thread(tracing.shutdown)
        await asyncio.to_thread(agent.shutdown)

    trace_id = turn.get_span_context().trace_id.to_bytes(16, "big")
    turn_id = turn.get_span_context().span_id.to_bytes(8, "big")
    assert [s.name for s in received.of("agent")] == ["agent turn"]
    gateway = received.of("mrtr-gateway")
    assert gateway, "the gateway exported nothing"
    assert all(span.trace_id == trace_id for span in gateway), "one trace, client to backend"

    rounds = sorted(
        (s for s in gateway if s.kind == ProtoSpan.SPAN_KIND_SERVER and s.name == "tools/call ask_two"),
        key=lambda s: s.start_time_unix_nano,
    )
    assert [_attributes(s)["mrtr_gateway.round"] for s in rounds] == [1, 2, 3]
    assert all(s.parent_span_id == turn_id for s in rounds)  # the client's context, from params._meta
    first = rounds[0]
    assert not first.links
    assert all([link.span_id for link in s.links] == [first.span_id] for s in rounds[1:])
    assert _attributes(first)["mrtr_gateway.result_type"] == "input_required"
    assert _attributes(rounds[-1])["mrtr_gateway.result_type"] == "complete"

    (exchange,) = [s for s in gateway if s.kind == ProtoSpan.SPAN_KIND_CLIENT and s.name == "tools/call ask_two"]
    assert exchange.parent_span_id == first.span_id
    assert exchange.end_time_unix_nano >= rounds[-1].start_time_unix_nano  # it spans the rounds

    ((_, params, headers),) = [r for r in backend.received_requests if r[0] == "tools/call"]
    sent = f"00-{trace_id.hex()}-{exchange.span_id.hex()}-"  # then the flags (sampled, random trace id)
    assert params["_meta"]["traceparent"].startswith(sent)
    assert headers["traceparent"] == params["_meta"]["traceparent"]
    assert trace.get_current_span() is trace.INVALID_SPAN
