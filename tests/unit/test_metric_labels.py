"""Bounded label families: a repeated label set reuses its child; client strings are never remembered."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from gateway.observability.metrics.labels import MAX_CACHED_CHILDREN, OTHER, Bounded, Capped, OneOf


def family(registry: CollectorRegistry) -> Bounded[Counter]:
    counter = Counter("calls", "calls", ["route", "method", "outcome"], registry=registry)
    return Bounded(counter, Capped(4), OneOf({"tools/call", "tools/list"}), Capped(4), defaults=("complete",))


def test_a_repeated_label_set_counts_on_one_child() -> None:
    registry = CollectorRegistry()
    calls = family(registry)
    first = calls.labels("r", "tools/call", "complete")
    assert calls.labels("r", "tools/call", "complete") is first
    assert calls.labels("r", "tools/call") is first  # the default fills the same series
    for _ in range(3):
        calls.labels("r", "tools/call", "complete").inc()
    calls.labels("r", "tools/call").inc()
    assert registry.get_sample_value("calls_total", {"route": "r", "method": "tools/call", "outcome": "complete"}) == 4


def test_values_a_policy_replaces_are_counted_as_other_and_never_remembered() -> None:
    registry = CollectorRegistry()
    calls = family(registry)
    for i in range(MAX_CACHED_CHILDREN + 100):
        calls.labels("r", f"client-chosen-{i}", "complete").inc()
    assert registry.get_sample_value("calls_total", {"route": "r", "method": OTHER, "outcome": "complete"}) == (
        MAX_CACHED_CHILDREN + 100
    )
    assert len(calls._children) == 0
    # A capped label past its limit ("r" and three more) is "other" from then on, and not remembered.
    for i in range(10):
        calls.labels(f"route{i}", "tools/list", "complete").inc()
    assert len(calls._children) == 3
    other = {"route": OTHER, "method": "tools/list", "outcome": "complete"}
    assert registry.get_sample_value("calls_total", other) == 7


def test_the_remembered_label_sets_are_bounded() -> None:
    registry = CollectorRegistry()
    counter = Counter("many", "many", ["name"], registry=registry)
    many = Bounded(counter, Capped(MAX_CACHED_CHILDREN * 2))
    for i in range(MAX_CACHED_CHILDREN + 10):
        many.labels(f"n{i}").inc()
    assert len(many._children) == MAX_CACHED_CHILDREN
    assert registry.get_sample_value("many_total", {"name": f"n{MAX_CACHED_CHILDREN + 5}"}) == 1
