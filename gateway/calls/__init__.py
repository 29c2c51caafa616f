"""The path of one modern call through a legacy backend (DESIGN.md, "The path of one call").

* :mod:`~gateway.calls.context` — who calls, the route, what a hold keeps between rounds;
* :mod:`~gateway.calls.driver` — :class:`CallDriver`: plain calls, input rounds, holds, retries;
* :mod:`~gateway.calls.backend` — leasing, sending, cancelling and releasing backend sessions.
"""

from gateway.calls.context import CallContext, Caller, RouteRuntime
from gateway.calls.driver import CallDriver

__all__ = ["CallContext", "CallDriver", "Caller", "RouteRuntime"]
