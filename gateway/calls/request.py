"""The core's own request type, and the one value a call carries through the core.

The front door turns a classified HTTP request into a :class:`CallRequest` (what the core needs:
method, params, the client's declared capabilities) — no JSON-RPC id, no HTTP detail, so the
gateway can make requests of its own (a ``tools/list`` for header validation) without inventing
an id. :class:`Call` bundles what every step of a call needs — the route, the request, the caller
and where its notifications go — into one frozen value instead of four parameters passed along.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.calls.context import Caller
from gateway.calls.route import RouteRuntime
from gateway.legacy.session import ServerNotification
from gateway.state.claims import RequestIdentity, request_target

NotificationSink = Callable[[ServerNotification], Awaitable[None]]


class RoundObserver(Protocol):
    """Told which hold and round a response belongs to (the request log joins a call's rounds)."""

    def held(self, hold_id: str, round_: int) -> None: ...


@dataclass(frozen=True, slots=True)
class CallRequest:
    """One MCP request as the core sees it."""

    method: str
    params: Mapping[str, Any] = field(default_factory=dict)
    client_capabilities: Mapping[str, Any] = field(default_factory=dict)
    trace_headers: Mapping[str, str] = field(default_factory=dict)
    """The client's W3C trace context HTTP headers (``traceparent``, ``tracestate``, ``baggage``),
    passed to the backend unchanged (the gateway's own tracing, when on, replaces them)."""

    @property
    def identity(self) -> RequestIdentity:
        """What a requestState binds a retry of this request to (method, target, arguments digest).

        Computed on each access (it digests every argument): take it once, where a state is bound."""
        return RequestIdentity.of(self.method, self.params)

    @property
    def target(self) -> str:
        """The tool or prompt name, or resource URI; without digesting the arguments."""
        return request_target(self.method, self.params)

    @property
    def request_state(self) -> str | None:
        state = self.params.get("requestState")
        return state if isinstance(state, str) else None

    @property
    def input_responses(self) -> Mapping[str, Any]:
        responses = self.params.get("inputResponses")
        return responses if isinstance(responses, Mapping) else {}


@dataclass(frozen=True, slots=True)
class Call:
    """One call through the core: where it goes, what it asks, who asks, where notifications go, and
    who hears of the rounds it opens."""

    route: RouteRuntime
    request: CallRequest
    caller: Caller
    on_notification: NotificationSink | None = None
    observer: RoundObserver | None = None

    def with_request(self, request: CallRequest) -> Call:
        """The same call asking ``request`` (a listing the gateway makes on the caller's behalf)."""
        return Call(self.route, request, self.caller, None)

    def held(self, hold_id: str, round_: int) -> None:
        if self.observer is not None:
            self.observer.held(hold_id, round_)

    async def notify(self, notification: ServerNotification) -> None:
        if self.on_notification is not None:
            await self.on_notification(notification)
