"""The connection cap's pure parts: the default derived from the open-file limit, the refusal's
bytes (issue 20). Its behaviour on sockets: tests/e2e/test_server_limits.py."""

from __future__ import annotations

import json
import resource

import pytest

from gateway.connections import CAP_CEILING, default_max_connections, refusal_response, refusal_slots


@pytest.mark.parametrize(
    ("soft", "cap"),
    [(256, 64), (1024, 256), (20_000, 6581), (65_536, 10_000), (resource.RLIM_INFINITY, CAP_CEILING)],
)
def test_the_default_cap_is_a_third_of_the_open_file_limit_left_after_the_reserve(soft: int, cap: int) -> None:
    assert default_max_connections(soft) == cap


def test_the_default_cap_reads_this_process_limit() -> None:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert default_max_connections() == default_max_connections(soft)
    assert 64 <= default_max_connections() <= CAP_CEILING


def test_refusals_in_progress_are_bounded_too() -> None:
    assert refusal_slots(10) == 256
    assert refusal_slots(6581) == 3290


def test_the_refusal_is_a_503_with_retry_after_a_clean_close_and_the_overloaded_error() -> None:
    head, _, body = refusal_response().partition(b"\r\n\r\n")
    lines = head.decode("ascii").split("\r\n")
    assert lines[0] == "HTTP/1.1 503 Service Unavailable"
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert (headers["Connection"], headers["Retry-After"]) == ("close", "1")
    assert (headers["Content-Type"], int(headers["Content-Length"])) == ("application/json", len(body))
    message = json.loads(body)
    assert message["id"] is None
    assert message["error"]["code"] == -32603
    assert message["error"]["data"] == {"reason": "overloaded", "cause": "max_connections", "retryAfter": 1}
