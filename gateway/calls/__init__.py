"""The path of one modern call through a legacy backend (docs/architecture.md, "The path of one call").

* :mod:`~gateway.calls.request` — the core's own request type and the :class:`Call` value;
* :mod:`~gateway.calls.context` — who calls, the route, the lease a hold keeps between rounds;
* :mod:`~gateway.calls.driver` — :class:`CallDriver`: dispatch, plain calls, the drive loop, resume;
* :mod:`~gateway.calls.rounds` — holding, answering, asking again, URL mode;
* :mod:`~gateway.calls.replayer` and :mod:`~gateway.calls.replay` — replaying a lost hold;
* :mod:`~gateway.calls.schemas` — the bounded tool-schema cache for ``Mcp-Param-*`` checks;
* :mod:`~gateway.calls.backend` — leasing, sending, cancelling and releasing backend sessions.

Nothing here knows HTTP or the front door: it is handed a :class:`Call` whose requestState, if
any, the front door has already opened.
"""

from gateway.calls.context import CallContext, Caller, RouteRuntime
from gateway.calls.driver import CallDriver
from gateway.calls.request import Call, CallRequest, NotificationSink
from gateway.calls.schemas import ToolSchemas

__all__ = [
    "Call",
    "CallContext",
    "CallDriver",
    "CallRequest",
    "Caller",
    "NotificationSink",
    "RouteRuntime",
    "ToolSchemas",
]
