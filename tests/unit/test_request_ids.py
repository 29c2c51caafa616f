"""Fresh request ids: the shape ``secrets.token_hex(8)`` gave, unique, mostly without a system call."""

from __future__ import annotations

import os
import re
from unittest import mock

from aiohttp.test_utils import make_mocked_request

from gateway.observability.requests import FreshIds, record_of


def test_ids_are_sixteen_hex_characters_and_never_repeat_across_refills() -> None:
    ids = FreshIds()
    drawn = [ids() for _ in range(3 * FreshIds.BATCH // 8 + 5)]
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in drawn)
    assert len(set(drawn)) == len(drawn)


def test_one_system_call_serves_a_batch_of_ids() -> None:
    ids = FreshIds()
    with mock.patch("gateway.observability.requests.os.urandom", wraps=os.urandom) as urandom:
        for _ in range(FreshIds.BATCH // 8):
            ids()
    assert urandom.call_count == 1


def test_a_forked_child_draws_a_batch_of_its_own() -> None:
    ids = FreshIds()
    ids()
    ids.forget()  # what the at-fork hook runs in the child
    with mock.patch("gateway.observability.requests.os.urandom", wraps=os.urandom) as urandom:
        ids()
    assert urandom.call_count == 1


def test_a_clients_plain_request_id_is_kept_and_anything_else_replaced() -> None:
    kept = make_mocked_request("POST", "/mcp", headers={"X-Request-Id": "trace-42"})
    assert record_of(kept).request_id == "trace-42"
    replaced = make_mocked_request("POST", "/mcp", headers={"X-Request-Id": "bad id\u00e9"})
    assert re.fullmatch(r"[0-9a-f]{16}", record_of(replaced).request_id)
