"""OpenTelemetry traces: one trace per call, across its rounds, down to the legacy backend.

What is traced (the OpenTelemetry MCP semantic conventions, ``docs/gen-ai/mcp.md``):

* one SERVER span per round, that is per client HTTP request to a route (:func:`round_span`),
  named ``{mcp.method.name} {target}`` (``tools/call get_weather``; the method alone for a resource,
  whose URI is no low-cardinality name). Its parent is the client's context from
  ``params._meta.traceparent`` (SEP-414), else from the HTTP ``traceparent`` header, which is then
  linked when both are present and differ; a retry forwarded over the replica hop takes the
  forwarding replica's span (the hop's header) as its parent. A later round is LINKED to the first
  round's span: its context rides in the sealed ``requestState`` (:func:`first_round`,
  :func:`retry_of`), 49 characters of trace and span id, and only while tracing is on;
* one CLIENT span per backend exchange (:func:`backend_span`), from sending the call upstream to its
  final answer, so it spans the rounds of a held call; its context goes to the backend in
  ``params._meta`` (every transport, stdio included) and in the HTTP headers (:func:`propagated`).

Attributes: ``mcp.method.name``, ``gen_ai.tool.name`` / ``gen_ai.prompt.name`` / ``mcp.resource.uri``,
``gen_ai.operation.name``, ``jsonrpc.request.id``, ``mcp.protocol.version``, ``network.transport``,
``error.type`` and ``rpc.response.status_code`` on failures, and the gateway's own under
``mrtr_gateway.``: ``route``, ``round``, ``result_type``, ``input_requests``, ``forwarded``. No
``mcp.session.id`` on the 2026-07-28 side (it has no sessions). Never a ``requestState``, a token, an
argument or an answer.

Only ``opentelemetry-api`` is imported here. The SDK and the OTLP/HTTP exporter (the ``tracing``
extra) are imported by :func:`setup_from_env` alone, when ``OTEL_TRACES_EXPORTER`` asks for them.
Until something is configured (:func:`configure`), every helper returns at once: tracing off costs
one attribute read per call site.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any, Final

import structlog
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

log = structlog.get_logger("gateway.tracing")

__all__ = [
    "Span",
    "answer_error",
    "answered",
    "backend_span",
    "configure",
    "enabled",
    "end",
    "error_type",
    "first_round",
    "inject",
    "propagated",
    "retry_of",
    "round_ended",
    "round_span",
    "sent",
    "setup_from_env",
    "shutdown",
]

PROTOCOL_VERSION: Final = "2026-07-28"
SERVICE_NAME: Final = "mrtr-gateway"
TRACED_META: Final = ("traceparent", "tracestate", "baggage")
"""``params._meta`` keys SEP-414 reserves for trace context (what the propagator reads and writes)."""
OWN: Final = "mrtr_gateway."
"""The prefix of the gateway's own attributes."""


class _State:
    tracer: trace.Tracer | None = None
    provider: Any = None  # the SDK provider setup_from_env made (flushed by shutdown)


_state = _State()
_FIRST_ROUND: ContextVar[str | None] = ContextVar("mrtr_gateway_first_round", default=None)
"""While a retry is served: its first round's span (``trace_id-span_id``), opened from its requestState."""
_OFF: Final = contextlib.nullcontext()


def configure(provider: trace.TracerProvider | None) -> None:
    """Trace with ``provider`` from now on (None: tracing off). Tests pass an in-memory one."""
    _state.tracer = None if provider is None else provider.get_tracer(SERVICE_NAME)


def enabled() -> bool:
    return _state.tracer is not None


# -- the SERVER span of one round ----------------------------------------------------------------


def round_span(
    headers: Mapping[str, str], method: str, params: Mapping[str, Any], request_id: Any, route: str, *, forwarded: bool
) -> contextlib.AbstractContextManager[None]:
    """The span of one client request to a route, current while the request is served."""
    tracer = _state.tracer
    if tracer is None:
        return _OFF
    return _round_span(tracer, headers, method, params, request_id, route, forwarded)


@contextlib.contextmanager
def _round_span(
    tracer: trace.Tracer,
    headers: Mapping[str, str],
    method: str,
    params: Mapping[str, Any],
    request_id: Any,
    route: str,
    forwarded: bool,
) -> Iterator[None]:
    parent, links = _parent(headers, params, forwarded)
    name, attributes = _describe(method, params)
    attributes["mcp.protocol.version"] = PROTOCOL_VERSION
    attributes["network.transport"] = "tcp"
    attributes[OWN + "route"] = route
    if request_id is not None:
        attributes["jsonrpc.request.id"] = str(request_id)
    if forwarded:
        attributes[OWN + "forwarded"] = True
    if "requestState" not in params:
        attributes[OWN + "round"] = 1
    first = _FIRST_ROUND.set(None)
    with tracer.start_as_current_span(
        name,
        context=parent,
        kind=SpanKind.SERVER,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except BaseException as exc:  # a cancelled round too (its client went away): its span says so
            cancelled = isinstance(exc, asyncio.CancelledError | ConnectionError)
            _error(span, "client_disconnected" if cancelled else type(exc).__qualname__, None)
            raise
        finally:
            _FIRST_ROUND.reset(first)


def round_ended(outcome: str | None, code: int | None, reason: str | None, message: str | None = None) -> None:
    """How the current round ended (the request log's outcome; an error's code and reason)."""
    if _state.tracer is None:
        return
    span = trace.get_current_span()
    if outcome is not None:
        span.set_attribute(OWN + "result_type", outcome)
    if outcome == "error":
        _error(span, str(code) if code is not None else reason or "_OTHER", message or reason, code)


def answered(result: Mapping[str, Any]) -> None:
    """The current round's result: how many input requests it asks, whether a tool failed."""
    if _state.tracer is None:
        return
    span = trace.get_current_span()
    requests = result.get("inputRequests")
    if isinstance(requests, Mapping):
        span.set_attribute(OWN + "input_requests", len(requests))
    if result.get("isError") is True:
        _error(span, "tool_error", None)


def retry_of(round_: int, first: str | None) -> None:
    """The current request continues a held call: its round, and a link to the call's first round
    (``first``: what :func:`first_round` sealed into the call's requestState)."""
    if _state.tracer is None:
        return
    span = trace.get_current_span()
    span.set_attribute(OWN + "round", round_)
    context = _span_context(first)
    if context is not None:
        _FIRST_ROUND.set(first)
        span.add_link(context, {OWN + "link": "first_round"})


def first_round() -> str | None:
    """What a new round's requestState carries: the call's first round span (``trace_id-span_id``),
    the current span when this request is the first round. None while tracing is off."""
    if _state.tracer is None:
        return None
    carried = _FIRST_ROUND.get()
    if carried is not None:
        return carried
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}-{context.span_id:016x}" if context.is_valid else None


# -- the CLIENT span of one backend exchange -----------------------------------------------------


def backend_span(method: str, params: Mapping[str, Any], route: str, transport: str, version: str) -> Span | None:
    """A span for one request to the legacy backend (child of the current round), not ended here."""
    tracer = _state.tracer
    if tracer is None:
        return None
    name, attributes = _describe(method, params)
    attributes["mcp.protocol.version"] = version
    attributes["network.transport"] = "pipe" if transport == "stdio" else "tcp"
    attributes[OWN + "route"] = route
    return tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)


def propagated(
    span: Span | None, params: dict[str, Any], headers: dict[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """``params`` and ``headers`` carrying ``span``'s context (``_meta`` and HTTP), as new dicts."""
    if span is None:
        return params, headers
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    meta = params.get("_meta")
    return {**params, "_meta": {**(meta if isinstance(meta, Mapping) else {}), **carrier}}, {**headers, **carrier}


def sent(span: Span | None, request_id: Any) -> None:
    if span is not None:
        span.set_attribute("jsonrpc.request.id", str(request_id))


def end(span: Span | None, error: str | None = None, code: int | None = None, message: str | None = None) -> None:
    """End a backend span, failed with ``error`` (its ``error.type``) when given."""
    if span is None:
        return
    if error is not None:
        _error(span, error, message, code)
    span.end()


def answer_error(
    error: Mapping[str, Any] | None, result: Mapping[str, Any] | None
) -> tuple[str | None, int | None, str | None]:
    """``(error.type, code, message)`` of a backend's final answer: a JSON-RPC error, a tool error
    (``tool_error``), or nothing."""
    if error is not None:
        code = error.get("code")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        message = error.get("message")
        return str(code) if code is not None else "_OTHER", code, message if isinstance(message, str) else None
    if result is not None and result.get("isError") is True:
        return "tool_error", None, None
    return None, None, None


def error_type(exc: BaseException) -> str:
    """``error.type`` of an exception that ended a call: the gateway's reason, else its class."""
    if isinstance(exc, asyncio.CancelledError):
        return "client_disconnected"
    reason = getattr(exc, "reason", None)
    return reason if isinstance(reason, str) else type(exc).__qualname__


def trace_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The client's trace context headers (:data:`TRACED_META`), as they came: a proxy passes them on."""
    return {name: headers[name] for name in TRACED_META if name in headers}


def inject(headers: dict[str, str]) -> None:
    """Put the current context in ``headers`` (a retry forwarded to the replica that holds it)."""
    if _state.tracer is not None:
        propagate.inject(headers)


# -- helpers -------------------------------------------------------------------------------------


def _describe(method: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The span name and the attributes that name the request's target."""
    attributes: dict[str, Any] = {"mcp.method.name": method}
    name = method
    if method == "tools/call" and isinstance(tool := params.get("name"), str):
        attributes["gen_ai.tool.name"] = tool
        attributes["gen_ai.operation.name"] = "execute_tool"
        name = f"{method} {tool}"
    elif method == "prompts/get" and isinstance(prompt := params.get("name"), str):
        attributes["gen_ai.prompt.name"] = prompt
        name = f"{method} {prompt}"
    elif isinstance(uri := params.get("uri"), str):
        attributes["mcp.resource.uri"] = uri
    return name, attributes


def _parent(headers: Mapping[str, str], params: Mapping[str, Any], forwarded: bool) -> tuple[Context, list[Link]]:
    """The round's parent, and the other context (the transport's) as a link when both differ."""
    meta = params.get("_meta")
    from_meta = _extract(meta) if isinstance(meta, Mapping) and "traceparent" in meta else None
    from_http = _extract(headers) if "traceparent" in headers else None
    if forwarded and from_http is not None:
        return from_http, []  # the hop: the forwarding replica's span (it signed the request)
    if from_meta is None:
        return from_http or Context(), []
    if from_http is None:
        return from_meta, []
    http_span = trace.get_current_span(from_http).get_span_context()
    same = http_span == trace.get_current_span(from_meta).get_span_context()
    return from_meta, [] if same else [Link(http_span)]


def _extract(carrier: Mapping[str, Any]) -> Context | None:
    """The context in a carrier with a valid ``traceparent``, else None (a client's malformed one)."""
    try:
        context = propagate.extract(carrier)
    except (ValueError, TypeError, AttributeError):
        return None
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def _span_context(value: str | None) -> SpanContext | None:
    """``trace_id-span_id`` (hex) as a remote span context; None when absent or malformed."""
    if not isinstance(value, str) or len(value) != 49 or value[32] != "-":
        return None
    try:
        trace_id, span_id = int(value[:32], 16), int(value[33:], 16)
    except ValueError:
        return None
    context = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return context if context.is_valid else None


def _error(span: Span, error_type: str, message: str | None, code: int | None = None) -> None:
    span.set_attribute("error.type", error_type)
    if code is not None:
        span.set_attribute("rpc.response.status_code", str(code))
    span.set_status(Status(StatusCode.ERROR, message))


# -- setup from the standard OTEL_* variables ----------------------------------------------------


def setup_from_env(env: Mapping[str, str]) -> bool:
    """Turn tracing on when ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``: OTLP/HTTP with
    protobuf; ``console``) and ``OTEL_SDK_DISABLED`` is not ``true``; the SDK reads the rest
    (``OTEL_EXPORTER_OTLP_*``, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``, ``OTEL_SERVICE_NAME``,
    ``OTEL_RESOURCE_ATTRIBUTES``). Unset, tracing stays off (unlike the SDK's own default of
    ``otlp``: a gateway with no collector sends nothing). True when tracing is on."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "").lower().split(",") if n.strip()]
    names = [n for n in names if n != "none"]
    if not names:
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError:
        log.warning("tracing_unavailable", exporters=names, hint="install the tracing extra: mrtr-gateway[tracing]")
        return False
    named = "OTEL_SERVICE_NAME" in env or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": SERVICE_NAME}))
    for name in names:
        exporter: SpanExporter
        if name == "otlp":
            protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            if protocol not in (None, "", "http/protobuf"):
                log.warning("tracing_protocol_unsupported", protocol=protocol, using="http/protobuf")
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        elif name == "console":
            exporter = ConsoleSpanExporter()
        else:
            log.warning("tracing_exporter_unknown", exporter=name)
            continue
        provider.add_span_processor(BatchSpanProcessor(exporter))
    _state.provider = provider
    configure(provider)
    log.info("tracing_enabled", exporters=names)
    return True


def shutdown() -> None:
    """Export what is left and stop the SDK that :func:`setup_from_env` started, if any."""
    provider, _state.provider = _state.provider, None
    configure(None)
    if provider is not None:
        provider.shutdown()
