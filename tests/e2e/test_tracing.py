"""OpenTelemetry traces of calls through the gateway, read from the SDK's in-memory exporter.

One SERVER span per round with the client's context as parent (``_meta`` first, else the HTTP
header), later rounds linked to the first, one CLIENT span per backend exchange spanning the rounds,
its context reaching the backend in ``_meta`` and the HTTP headers; nothing secret in attributes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from fake_backend import FakeBackend
from harness import BareClient, accept, route, running_gateway, running_replicas
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from gateway.observability import tracing

Backend = tuple[FakeBackend, str]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
HEADER_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(provider)
    try:
        yield exporter
    finally:
        tracing.configure(None)
        provider.shutdown()


def _servers(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.kind is SpanKind.SERVER]


def _clients(exporter: InMemorySpanExporter, method: str = "tools/call") -> list[ReadableSpan]:
    """The backend exchanges of ``method`` (a tools/call also lists the tools, for Mcp-Param-* checks)."""
    spans = exporter.get_finished_spans()
    return [s for s in spans if s.kind is SpanKind.CLIENT and s.name.startswith(method)]


def _ids(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


def _parent(span: ReadableSpan) -> tuple[str, str] | None:
    return None if span.parent is None else (f"{span.parent.trace_id:032x}", f"{span.parent.span_id:016x}")


def _attribute_text(exporter: InMemorySpanExporter) -> str:
    return repr([dict(s.attributes or {}) for s in exporter.get_finished_spans()])


async def _retry(client: BareClient, name: str, state: str, answers: dict[str, Any], meta: dict[str, Any]) -> Any:
    return await client.call_tool(name, extra={"inputResponses": answers, "requestState": state, **meta})


async def _ask_two(client: BareClient, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The three rounds of ``ask_two``: a name is asked, then a color, then the answer."""
    first = (await client.call_tool("ask_two", extra=meta)).result
    (k1,) = first["inputRequests"]
    second = (await _retry(client, "ask_two", first["requestState"], {k1: accept(name="Adalovelace")}, meta)).result
    (k2,) = second["inputRequests"]
    third = (await _retry(client, "ask_two", second["requestState"], {k2: accept(color="vermilion")}, meta)).result
    return [first, second, third]


async def test_rounds_share_the_clients_trace_and_later_rounds_link_to_the_first(
    fake_backend: Backend, http: aiohttp.ClientSession, spans: InMemorySpanExporter
) -> None:
    backend, url = fake_backend
    meta = {"_meta": {"traceparent": TRACEPARENT}}
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        rounds = await _ask_two(BareClient(http, gw.url()), meta)
    assert rounds[2]["content"][0]["text"] == "name=Adalovelace;color=vermilion"

    servers = _servers(spans)
    assert [s.name for s in servers] == ["tools/call ask_two"] * 3
    assert all(_parent(s) == (TRACE_ID, CLIENT_SPAN) for s in servers)
    assert [s.attributes["mrtr_gateway.round"] for s in servers if s.attributes] == [1, 2, 3]
    assert [s.attributes.get("mrtr_gateway.result_type") for s in servers if s.attributes] == [
        "input_required",
        "input_required",
        "complete",
    ]
    assert [s.attributes.get("mrtr_gateway.input_requests") for s in servers if s.attributes] == [1, 1, None]
    first = servers[0]
    assert first.attributes is not None
    assert first.attributes["mcp.method.name"] == "tools/call"
    assert first.attributes["gen_ai.tool.name"] == "ask_two"
    assert first.attributes["gen_ai.operation.name"] == "execute_tool"
    assert first.attributes["mcp.protocol.version"] == "2026-07-28"
    assert first.attributes["jsonrpc.request.id"] == "1"
    assert "mcp.session.id" not in first.attributes
    assert not first.links
    for later in servers[1:]:
        assert [(f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") for link in later.links] == [
            _ids(first)
        ]

    # One backend exchange, a child of the first round, open until the last round's answer.
    (client,) = _clients(spans)
    assert client.name == "tools/call ask_two"
    assert _parent(client) == _ids(first)
    assert client.attributes is not None
    assert client.attributes["mcp.protocol.version"] != "2026-07-28"  # the legacy server's revision
    assert client.attributes["network.transport"] == "tcp"
    assert "jsonrpc.request.id" in client.attributes
    assert client.end_time is not None
    assert servers[2].start_time is not None
    assert client.end_time >= servers[2].start_time

    # The backend was handed the exchange's context in _meta and in the HTTP header.
    ((_, params, headers),) = [r for r in backend.received_requests if r[0] == "tools/call"]
    trace_id, span_id = _ids(client)
    assert params["_meta"]["traceparent"] == f"00-{trace_id}-{span_id}-01"
    assert headers["traceparent"] == f"00-{trace_id}-{span_id}-01"

    text = _attribute_text(spans)
    for secret in (rounds[0]["requestState"], rounds[1]["requestState"], "Adalovelace", "vermilion"):
        assert secret not in text


async def test_the_http_header_is_the_parent_when_meta_has_none(
    fake_backend: Backend, http: aiohttp.ClientSession, spans: InMemorySpanExporter
) -> None:
    _, url = fake_backend
    header = {"traceparent": f"00-{TRACE_ID}-{HEADER_SPAN}-01"}
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        reply = await BareClient(http, gw.url()).call_tool("add", {"a": 1, "b": 2}, headers=header)
    assert reply.status == 200
    (server,) = _servers(spans)
    assert server.name == "tools/call add"
    assert _parent(server) == (TRACE_ID, HEADER_SPAN)
    assert not server.links
    (client,) = _clients(spans)
    assert _parent(client) == _ids(server)


async def test_meta_wins_over_the_header_which_is_linked(
    fake_backend: Backend, http: aiohttp.ClientSession, spans: InMemorySpanExporter
) -> None:
    _, url = fake_backend
    other_trace = "0af7651916cd43dd8448eb211c80319c"
    header = {"traceparent": f"00-{other_trace}-{HEADER_SPAN}-01"}
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        await client.call_tool("add", {"a": 1, "b": 2}, headers=header, extra={"_meta": {"traceparent": TRACEPARENT}})
    (server,) = _servers(spans)
    assert _parent(server) == (TRACE_ID, CLIENT_SPAN)
    assert [(f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") for link in server.links] == [
        (other_trace, HEADER_SPAN)
    ]


async def test_without_context_a_round_starts_a_trace_and_a_bad_traceparent_is_ignored(
    fake_backend: Backend, http: aiohttp.ClientSession, spans: InMemorySpanExporter
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        await client.call_tool("add", {"a": 1, "b": 2})
        await client.call_tool("add", {"a": 1, "b": 2}, extra={"_meta": {"traceparent": 42}})
        await client.call_tool("add", {"a": 1, "b": 2}, extra={"_meta": {"traceparent": "00-zz-yy-01"}})
    servers = _servers(spans)
    assert len(servers) == 3
    assert all(s.parent is None for s in servers)
    assert len({_ids(s)[0] for s in servers}) == 3


async def test_errors_set_the_error_type_and_status(
    fake_backend: Backend, http: aiohttp.ClientSession, spans: InMemorySpanExporter
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        reply = await client.retry("ask_two", "v2.not-a-state", {})
    assert reply.status == 400
    (server,) = _servers(spans)
    assert server.attributes is not None
    assert server.attributes["error.type"] == str(reply.error["code"])
    assert server.attributes["rpc.response.status_code"] == str(reply.error["code"])
    assert server.attributes["mrtr_gateway.result_type"] == "error"
    assert server.status.status_code is StatusCode.ERROR


async def test_a_forwarded_retry_is_a_child_of_the_forwarding_replica(
    fake_backend: Backend, http: aiohttp.ClientSession, spans: InMemorySpanExporter
) -> None:
    _, url = fake_backend
    meta = {"_meta": {"traceparent": TRACEPARENT}}
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("ask_city", extra=meta)).result
        (key,) = first["inputRequests"]
        answers = {key: accept(city="Oslo")}
        done = await _retry(BareClient(http, b.url()), "ask_city", first["requestState"], answers, meta)
    assert done.text == "city=Oslo"
    servers = _servers(spans)
    assert len(servers) == 3
    round1 = servers[0]
    owner = next(s for s in servers if s.attributes and s.attributes.get("mrtr_gateway.forwarded"))
    (front,) = [s for s in servers[1:] if s is not owner]
    assert _parent(front) == (TRACE_ID, CLIENT_SPAN)
    assert front.attributes is not None
    assert front.attributes["mrtr_gateway.result_type"] == "forwarded"
    assert _parent(owner) == _ids(front)  # the hop carried the forwarding replica's span
    assert owner.attributes is not None
    assert owner.attributes["mrtr_gateway.round"] == 2
    for retry in (front, owner):
        assert [f"{link.context.span_id:016x}" for link in retry.links] == [_ids(round1)[1]]
    (client,) = _clients(spans)
    assert _parent(client) == _ids(round1)


async def test_with_tracing_off_the_client_trace_context_reaches_the_backend_unchanged(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    """A proxy passes W3C trace context on: ``params._meta`` and the HTTP headers, as the client sent
    them, on the call and on each round's retry (issue 27 item 5)."""
    backend, url = fake_backend
    assert not tracing.enabled()
    header_parent = f"00-{TRACE_ID}-{HEADER_SPAN}-01"
    headers = {"traceparent": header_parent, "tracestate": "vendor=1", "baggage": "user=ada"}
    meta = {"traceparent": TRACEPARENT, "tracestate": "vendor=2", "baggage": "team=x"}
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        plain = await client.call_tool("add", {"a": 1, "b": 2}, headers=headers, extra={"_meta": dict(meta)})
        first = (await client.call_tool("ask_city", headers=headers, extra={"_meta": dict(meta)})).result
        (key,) = first["inputRequests"]
        done = await client.retry("ask_city", first["requestState"], {key: accept(city="Oslo")}, headers=headers)
    assert plain.status == 200
    assert done.text == "city=Oslo"
    calls = [(params, sent) for method, params, sent in backend.received_requests if method == "tools/call"]
    assert len(calls) == 2
    for params, sent in calls:
        assert {k: params["_meta"][k] for k in meta} == meta
        assert {k: sent[k] for k in headers} == headers
