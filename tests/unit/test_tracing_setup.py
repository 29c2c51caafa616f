"""Tracing is turned on by the standard OTEL_* variables only, and is off (no tracer) otherwise."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from gateway.observability import tracing


@pytest.fixture(autouse=True)
def _off_afterwards() -> Iterator[None]:
    yield
    tracing.shutdown()
    assert not tracing.enabled()


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"OTEL_TRACES_EXPORTER": "none"},
        {"OTEL_TRACES_EXPORTER": ""},
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"},
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "TRUE"},
    ],
)
def test_tracing_stays_off_unless_an_exporter_is_named(env: dict[str, str]) -> None:
    assert tracing.setup_from_env(env) is False
    assert not tracing.enabled()
    assert tracing.first_round() is None
    assert tracing.backend_span("tools/call", {"name": "x"}, "r", "stdio", "2025-06-18") is None


def test_an_exporter_turns_it_on_and_shutdown_turns_it_off() -> None:
    assert tracing.setup_from_env({"OTEL_TRACES_EXPORTER": "console"}) is True
    assert tracing.enabled()
    tracing.shutdown()
    assert not tracing.enabled()


def test_without_the_tracing_extra_it_says_so_and_stays_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # an import of it fails
    assert tracing.setup_from_env({"OTEL_TRACES_EXPORTER": "otlp"}) is False
    assert not tracing.enabled()


def test_a_sealed_first_round_link_is_checked_before_use() -> None:
    assert tracing._span_context(None) is None
    assert tracing._span_context("x" * 49) is None
    assert tracing._span_context("0" * 32 + "-" + "0" * 16) is None  # all-zero ids are invalid
    context = tracing._span_context("4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7")
    assert context is not None
    assert context.is_remote
