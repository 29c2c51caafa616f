"""``requests_total`` is read from the request's record, as the canonical line is: one count per routed request."""

from __future__ import annotations

import pytest

from gateway.observability.requests import RequestRecord


def _record(route: str = "demo", outcome: str | None = None, reason: str | None = None) -> RequestRecord:
    record = RequestRecord(request_id="r1")
    record.call(route, "tools/call")
    record.outcome, record.reason = outcome, reason
    return record


@pytest.mark.parametrize(
    ("record", "counted"),
    [
        (_record(outcome="complete"), "complete"),
        (_record(outcome="input_required"), "input_required"),
        (_record(outcome="forwarded"), "forwarded"),
        (_record(outcome="legacy_passthrough"), "legacy_passthrough"),
        (_record(outcome="rejected", reason="origin"), "rejected"),
        (_record(outcome="error", reason="max_rounds"), "error:max_rounds"),
        (_record(outcome="error"), "error:internal_error"),
        (_record(outcome="error", reason="x" * 100), "error:" + "x" * 54),
        (_record(outcome="client_disconnected"), None),
        (_record(outcome=None), None),
        (_record(route="-", outcome="complete"), None),
    ],
)
def test_the_counted_outcome_is_the_records(record: RequestRecord, counted: str | None) -> None:
    assert record.counted_as() == counted
