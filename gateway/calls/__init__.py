"""The path of one modern call through a legacy backend (docs/architecture.md, "The path of one call").

* :mod:`~gateway.calls.request` — the core's own request type and the :class:`Call` value;
* :mod:`~gateway.calls.context` — who calls, the route, the call's session a hold keeps between rounds;
* :mod:`~gateway.calls.core` — :class:`CallCore`: the call's lifecycle (dispatch, plain calls, the
  drive loop, resume), with replay as its strategy;
* :mod:`~gateway.calls.holding` — the rounds the core opens: a hold, its sealed state, the
  ``input_required`` answer, the url-mode round of a legacy -32042;
* :mod:`~gateway.calls.rounds` — what a round asks and what a retry's answers mean (pure);
* :mod:`~gateway.calls.replayer` and :mod:`~gateway.calls.transcript` — replaying a lost hold, and its
  transcript's typed steps;
* :mod:`~gateway.calls.schemas` — the bounded tool-schema cache for ``Mcp-Param-*`` checks;
* :mod:`~gateway.calls.lease` — the :class:`~gateway.calls.lease.Lease` of a backend session (given
  up in one place when a request fails, unless handed over to a hold, its expiry or a task's runner);
* :mod:`~gateway.calls.backend` — sending, answering, the one wind-down of a call given up, releasing;
* :mod:`~gateway.calls.ending` — how that wind-down ends the backend's work.

Nothing here knows HTTP or the front door: it is handed a :class:`Call` whose requestState, if
any, the front door has already opened.
"""
