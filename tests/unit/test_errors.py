"""The gateway's own error codes and the one JSON-RPC error → HTTP status table (issue 7 item 5)."""

from __future__ import annotations

import pytest
from mcp_types.jsonrpc import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    URL_ELICITATION_REQUIRED,
)

from gateway.errors import (
    BACKEND_UNAVAILABLE,
    HOLD_LOST,
    OVERLOADED,
    BackendUnavailable,
    GatewayError,
    HoldLimitReached,
    HoldLost,
    InvalidRequestState,
    MissingCapability,
    Overloaded,
    UpstreamError,
    http_status_for,
)
from gateway.translate import results


@pytest.mark.parametrize(
    "error",
    [
        BackendUnavailable("timeout", "10.0.0.1:80 timed out"),
        Overloaded("hold_limit", 3),
        HoldLost("owner_unreachable"),
        HoldLimitReached("max_rounds", "The call took more than 10 input rounds"),
        GatewayError("something"),
    ],
)
def test_gateway_conditions_use_no_code_from_the_closed_or_reserved_bands(error: GatewayError) -> None:
    # basic/index.mdx §Error Codes: -32000..-32019 is legacy (new implementations SHOULD NOT use it),
    # -32020..-32099 holds only codes the specification defines.
    assert not -32099 <= error.to_error()["code"] <= -32000
    assert error.to_error()["code"] == INTERNAL_ERROR


@pytest.mark.parametrize(
    ("error", "reason", "cause", "status"),
    [
        (BackendUnavailable("connect_failed"), BACKEND_UNAVAILABLE, "connect_failed", 502),
        (BackendUnavailable("timeout"), BACKEND_UNAVAILABLE, "timeout", 502),
        (Overloaded("principal_hold_limit", 2), OVERLOADED, "principal_hold_limit", 503),
        (HoldLost("owner_unreachable"), HOLD_LOST, "owner_unreachable", 502),
        (HoldLost("owner_unresponsive"), HOLD_LOST, "owner_unresponsive", 502),
        (Overloaded("max_connections", 1), OVERLOADED, "max_connections", 503),
    ],
)
def test_each_condition_has_a_machine_readable_reason_and_a_status_that_does_not_blame_the_client(
    error: GatewayError, reason: str, cause: str, status: int
) -> None:
    data = error.to_error()["data"]
    assert (data["reason"], data["cause"]) == (reason, cause)
    assert error.http_status == status
    assert not 400 <= error.http_status < 500


def test_backend_detail_never_reaches_the_client() -> None:
    error = BackendUnavailable("connect_failed", "backend.internal:8080 refused")
    assert "backend.internal" not in str(error.to_error())


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (InvalidRequestState("bad_tag"), 400),
        (MissingCapability({"sampling": {}}), 400),
        (UpstreamError(INTERNAL_ERROR, "backend blew up", {"reason": "overloaded"}), 200),
        (UpstreamError(INVALID_PARAMS, "Unknown prompt: x"), 400),
        (UpstreamError(METHOD_NOT_FOUND, "Method not found"), 404),
    ],
)
def test_client_errors_and_relayed_backend_errors_keep_the_spec_statuses(error: GatewayError, status: int) -> None:
    # A relayed backend error never borrows a gateway status, whatever its data says.
    assert error.http_status == status


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (PARSE_ERROR, 400),
        (INVALID_REQUEST, 400),
        (INVALID_PARAMS, 400),
        (METHOD_NOT_FOUND, 404),
        (HEADER_MISMATCH, 400),
        (MISSING_REQUIRED_CLIENT_CAPABILITY, 400),
        (UNSUPPORTED_PROTOCOL_VERSION, 400),
    ],
)
def test_spec_codes_map_to_their_http_status(code: int, status: int) -> None:
    assert http_status_for(code) == status


@pytest.mark.parametrize(
    ("backend_code", "code"),
    [
        (0, INTERNAL_ERROR),  # FastMCP: any exception, unknown resource or prompt included
        (CONNECTION_CLOSED, INTERNAL_ERROR),
        (-32010, INTERNAL_ERROR),
        (
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            INTERNAL_ERROR,
        ),  # spec-reserved codes keep their meaning only on their own hop
        (URL_ELICITATION_REQUIRED, INTERNAL_ERROR),
        (PARSE_ERROR, INTERNAL_ERROR),
        (INVALID_REQUEST, INTERNAL_ERROR),
        (12345, INTERNAL_ERROR),
        ("oops", INTERNAL_ERROR),
        (True, INTERNAL_ERROR),
        (INTERNAL_ERROR, INTERNAL_ERROR),
        (INVALID_PARAMS, INVALID_PARAMS),
        (METHOD_NOT_FOUND, METHOD_NOT_FOUND),
        (-32002, INVALID_PARAMS),
    ],
)
def test_backend_error_codes_become_codes_the_spec_allows_and_keep_their_message(
    backend_code: object, code: int
) -> None:
    mapped = results.modern_error({"code": backend_code, "message": "Unknown resource: x://y", "data": [1]})
    assert mapped == {"code": code, "message": "Unknown resource: x://y", "data": [1]}
