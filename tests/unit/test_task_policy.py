"""What a route's ``tasks`` section says of each tool, and what the gateway advertises for it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gateway.config.tasks import TasksPolicy, ToolTaskPolicy
from gateway.translate import capabilities as caps
from gateway.translate.results import discover_result, legacy_params

EXT = "io.modelcontextprotocol/tasks"


def test_tasks_are_off_until_enabled_whatever_the_modes() -> None:
    policy = TasksPolicy.model_validate({"default": {"mode": "always"}, "tools": {"x": {"mode": "after"}}})
    assert not policy.enabled
    assert policy.for_tool("x").mode == "off"
    assert policy.for_tool("y").mode == "off"


def test_a_tool_inherits_what_it_does_not_set() -> None:
    policy = TasksPolicy.model_validate(
        {
            "enabled": True,
            "default": {"mode": "after", "after_ms": 700},
            "without_extension": "reject",
            "tools": {"fast": {"mode": "off"}, "batch": {"mode": "always", "without_extension": "sync"}},
        }
    )
    assert policy.for_tool("other") == ToolTaskPolicy("after", 700, "reject")
    assert policy.for_tool("fast") == ToolTaskPolicy("off", 700, "reject")
    assert policy.for_tool("batch") == ToolTaskPolicy("always", 700, "sync")


def test_defaults_are_safe() -> None:
    policy = TasksPolicy()
    assert (policy.ttl, policy.retention, policy.poll_interval_ms) == (3600, 300, 2000)
    assert policy.max_result_bytes == 1024 * 1024
    assert policy.without_extension == "sync"
    assert not policy.require_name_header


@pytest.mark.parametrize(
    "bad",
    [
        {"default": {"mode": "sometimes"}},
        {"tools": {"x": {"mode": "after", "after": 5}}},
        {"poll_interval_ms": 0},
        {"ttl": 0},
        {"passthrough": True},
    ],
)
def test_a_bad_tasks_section_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        TasksPolicy.model_validate(bad)


def test_the_extension_is_declared_per_request_as_an_object() -> None:
    assert caps.declares_tasks({"extensions": {EXT: {}}})
    assert not caps.declares_tasks({"extensions": {EXT: True}})
    assert not caps.declares_tasks({"extensions": []})
    assert not caps.declares_tasks({"elicitation": {}})
    assert "extensions" not in caps.normalize({"extensions": {EXT: {}}}), "never sent to a backend"


def test_discover_merges_the_extension_with_the_backends_own_and_never_legacy_tasks() -> None:
    init = {"capabilities": {"tools": {}, "tasks": {"requests": {}}, "extensions": {"x/y": {"a": 1}}}}
    on = discover_result(init, ttl_ms=0, cache_scope="private", tasks=True)
    assert on["capabilities"] == {"tools": {}, "extensions": {"x/y": {"a": 1}, EXT: {}}}
    off = discover_result(init, ttl_ms=0, cache_scope="private")
    assert off["capabilities"] == {"tools": {}, "extensions": {"x/y": {"a": 1}}}


def test_a_legacy_task_param_is_never_sent_upstream() -> None:
    assert legacy_params({"name": "t", "arguments": {}, "task": {"ttl": 1}}) == {"name": "t", "arguments": {}}
