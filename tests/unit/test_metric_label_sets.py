"""Issue 20: the fixed label sets a route's series are created from, each from its one source.

:meth:`Metrics.route_built` creates every route's series at 0 from ``gateway.errors.BACKEND_CAUSES``,
``metrics.FORWARD_OUTCOMES`` and the route's auth reasons. A cause or reason raised somewhere but
missing from its set would appear only at its first increment again (invisible to ``rate()`` on a
fresh pod), so the sets are checked against the code that raises them; and each must fit in its
label's cap, which the created series count against.
"""

from __future__ import annotations

import re
from pathlib import Path

from gateway.auth.gate import TRUSTED_HEADER_REASONS
from gateway.auth.verify import REASONS as JWT_REASONS
from gateway.errors import BACKEND_CAUSES
from gateway.legacy.limits import FLOOD_REASON
from gateway.observability.metrics.forwards import FORWARD_OUTCOMES
from gateway.observability.metrics.holds import ROUNDS_BUCKETS
from gateway.observability.metrics.labels import Capped
from gateway.observability.metrics.registry import Metrics

GATEWAY = Path(__file__).resolve().parents[2] / "gateway"


def sources() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in GATEWAY.rglob("*.py")}


def literal_arguments(pattern: str) -> dict[str, list[str]]:
    """Each string literal passed where ``pattern`` (a regex ending before the literal) matches."""
    found: dict[str, list[str]] = {}
    for path, text in sources().items():
        for match in re.finditer(pattern + r'"([a-z_]+)"', text):
            found.setdefault(match.group(1), []).append(str(path.relative_to(GATEWAY)))
    return found


def test_every_backend_failure_cause_raised_is_in_the_causes_table() -> None:
    raised = literal_arguments(r"BackendUnavailable\(")
    raised.setdefault(FLOOD_REASON, ["legacy/limits.py"])
    assert len(raised) >= 10, "the scan finds the causes the legacy transports raise"
    missing = {cause: where for cause, where in raised.items() if cause not in BACKEND_CAUSES}
    assert not missing, f"add these causes to gateway.errors.BACKEND_CAUSES: {missing}"


def test_every_auth_refusal_reason_is_in_its_set() -> None:
    forbidden = literal_arguments(r"_forbidden\(") | literal_arguments(
        r'_forbidden\("header_missing" if not value else '
    )
    assert set(forbidden) == TRUSTED_HEADER_REASONS
    refused = literal_arguments(r"Refused\(") | literal_arguments(r"_unauthorized\(")
    refused |= literal_arguments(r'_unauthorized\("missing" if not credential else ')
    assert set(refused) <= JWT_REASONS, set(refused) - JWT_REASONS
    assert not TRUSTED_HEADER_REASONS & JWT_REASONS


def test_forward_outcomes_are_counted_by_name_from_the_one_list() -> None:
    counted = literal_arguments(r"forwards\.labels\([\w.]+, ")
    assert not counted, f"count forwards with the constants of metrics.FORWARD_OUTCOMES: {counted}"


def cap(policy: object) -> int:
    assert isinstance(policy, Capped)
    return policy._limit


def test_every_fixed_set_fits_its_label_cap_with_room_to_spare() -> None:
    metrics = Metrics()
    assert len(BACKEND_CAUSES) <= cap(metrics.backend_errors._policies[1]) // 2
    assert len(FORWARD_OUTCOMES) <= cap(metrics.forwards._policies[1]) // 2
    assert len(JWT_REASONS | TRUSTED_HEADER_REASONS) <= cap(metrics.auth_refusals._policies[1]) // 2


def test_route_built_creates_the_series_at_zero_counted_against_the_caps() -> None:
    metrics = Metrics()
    metrics.route_built("r", backend_causes=BACKEND_CAUSES, auth_reasons=JWT_REASONS)
    get = metrics.registry.get_sample_value
    for cause in BACKEND_CAUSES:
        assert get("mrtr_gateway_backend_errors_total", {"route": "r", "reason": cause}) == 0
    for outcome in FORWARD_OUTCOMES:
        assert get("mrtr_gateway_forwards_total", {"route": "r", "outcome": outcome}) == 0
    for reason in JWT_REASONS:
        assert get("mrtr_gateway_auth_refusals_total", {"route": "r", "reason": reason}) == 0
    assert get("mrtr_gateway_auth_refusals_total", {"route": "r", "reason": "untrusted_peer"}) is None
    for family in ("hold_expirations_total", "input_rounds_total", "backend_initializations_total"):
        assert get(f"mrtr_gateway_{family}", {"route": "r"}) == 0
    assert get("mrtr_gateway_call_rounds_count", {"route": "r"}) == 0
    reasons = metrics.backend_errors._policies[1]
    assert isinstance(reasons, Capped)
    assert reasons._seen == set(BACKEND_CAUSES), "the created label values take their places under the cap"


def test_one_round_is_a_bucket_of_its_own() -> None:
    """Rounds are integers: consecutive integer buckets up to the default max_rounds make
    ``ceil(histogram_quantile(...))`` exact (the dashboard's query)."""
    assert ROUNDS_BUCKETS[:10] == tuple(range(1, 11))
