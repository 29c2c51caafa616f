"""The HTTP client's failures, mapped once (gateway.http_errors): the cause each becomes, and which never connected."""

from __future__ import annotations

import ssl
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from gateway.errors import BACKEND_CAUSES, BACKEND_UNAVAILABLE, BackendUnavailable
from gateway.http_errors import (
    CLIENT_FAILURES,
    backend_unavailable,
    never_connected,
    raised_by_client,
    transport_cause,
)

_KEY: Any = SimpleNamespace(host="backend.internal", port=8080, ssl=True)


def _refused() -> aiohttp.ClientConnectorError:
    return aiohttp.ClientConnectorError(_KEY, ConnectionRefusedError(111, "Connection refused"))


def _tls() -> aiohttp.ClientConnectorError:
    return aiohttp.ClientConnectorCertificateError(_KEY, ssl.SSLCertVerificationError("bad certificate"))


@pytest.mark.parametrize(
    ("failure", "cause", "connected"),
    [
        (_refused(), "connect_failed", False),
        (_tls(), "connect_failed", True),
        (aiohttp.ConnectionTimeoutError(), "timeout", False),
        (aiohttp.SocketTimeoutError(), "timeout", True),
        (TimeoutError(), "timeout", True),
        (aiohttp.ClientPayloadError("Response payload is not completed"), "stream_broken", True),
        (aiohttp.ServerDisconnectedError(), "transport_error", True),
        (aiohttp.TooManyRedirects(SimpleNamespace(real_url="x"), ()), "transport_error", True),  # type: ignore[arg-type]
    ],
)
def test_each_client_failure_has_one_cause_and_one_answer_to_whether_it_connected(
    failure: BaseException, cause: str, connected: bool
) -> None:
    assert isinstance(failure, CLIENT_FAILURES)
    assert transport_cause(failure) == cause
    assert cause in BACKEND_CAUSES
    assert never_connected(failure) is not connected
    mapped = backend_unavailable(failure, "initialize")
    assert isinstance(mapped, BackendUnavailable)
    assert (mapped.to_error()["data"], mapped.http_status) == ({"reason": BACKEND_UNAVAILABLE, "cause": cause}, 502)
    assert mapped.detail.startswith("initialize: ")


def test_the_clients_own_read_timeout_is_told_from_the_callers() -> None:
    assert raised_by_client(aiohttp.SocketTimeoutError())
    assert not raised_by_client(TimeoutError())
