"""The HTTP client's failures, and what each means to the gateway: the one reader of aiohttp's exception tree.

Every request the gateway makes itself (to a backend, an old client's exchange passed through, a
retry forwarded to another replica, a token endpoint, a JWKS URL) can fail inside the client
library. What such a failure means does not depend on who made the request, so it is decided here
once, and the callers name no aiohttp exception:

* :data:`CLIENT_FAILURES` is what to catch around a request (the library's errors and timeouts);
* :func:`transport_cause` is the pure mapping of one onto a ``data.cause`` of
  :class:`~gateway.errors.BackendUnavailable` (:data:`~gateway.errors.BACKEND_CAUSES`):
  ``connect_failed``, ``timeout``, ``stream_broken`` or ``transport_error``;
* :func:`backend_unavailable` builds that :class:`~gateway.errors.BackendUnavailable`, to raise
  ``from`` the failure (:class:`gateway.legacy.wire.backend_errors` does, around every backend request);
* :func:`never_connected` tells a request that reached no peer (refused, or the connect timed out)
  from one that failed after it did: a forwarded retry's owner is gone only then;
* :func:`raised_by_client` tells the client's own read timeout from an ``asyncio.timeout`` of the
  caller's.

Bottom floor: it imports :mod:`gateway.errors` and aiohttp, nothing else of the gateway.
"""

from __future__ import annotations

from typing import Final

import aiohttp

from gateway.errors import BackendUnavailable

__all__ = [
    "CLIENT_FAILURES",
    "backend_unavailable",
    "never_connected",
    "raised_by_client",
    "transport_cause",
]

CLIENT_FAILURES: Final = (aiohttp.ClientError, TimeoutError)
"""What a request made with the gateway's HTTP client fails with (besides the caller's own checks)."""


def transport_cause(exc: BaseException) -> str:
    """The :class:`~gateway.errors.BackendUnavailable` cause of ``exc``, one of :data:`CLIENT_FAILURES`."""
    if isinstance(exc, aiohttp.ClientConnectorError):  # TLS failures included: no usable connection
        return "connect_failed"
    if isinstance(exc, aiohttp.ServerTimeoutError | TimeoutError):
        return "timeout"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "stream_broken"
    return "transport_error"


def backend_unavailable(exc: BaseException, what: str) -> BackendUnavailable:
    """The :class:`~gateway.errors.BackendUnavailable` that ``exc`` (one of :data:`CLIENT_FAILURES`)
    stands for, to be raised ``from exc``; ``what`` and the detail are for the log only."""
    cause = transport_cause(exc)
    if isinstance(exc, aiohttp.ClientConnectorError):
        detail = str(exc.os_error or exc)
    elif cause == "timeout":
        detail = "timed out"
    elif cause == "stream_broken":
        detail = str(exc)
    else:
        detail = type(exc).__name__
    return BackendUnavailable(cause, f"{what}: {detail}")


def never_connected(exc: BaseException) -> bool:
    """``exc`` came before any connection was made: refused, unresolvable, or the connect timed out
    (a TLS failure is a peer that answered, so it does not count)."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return True
    return isinstance(exc, aiohttp.ClientConnectorError) and not isinstance(exc, aiohttp.ClientSSLError)


def raised_by_client(exc: BaseException) -> bool:
    """``exc`` is the HTTP client's own (its read timeout is also a :class:`TimeoutError`)."""
    return isinstance(exc, aiohttp.ClientError)
