"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned) against the gateway
in front of a legacy server: every scenario 2026-07-28 requires passes, except the checks listed in
:data:`conformance_suite.scenarios.NOT_APPLICABLE` (documented in ``docs/conformance.md``).

A scenario passes when none of its checks is a FAILURE or a WARNING, other than its not-applicable
checks, which must still fail exactly as listed (an entry that starts passing is stale). The tasks
extension's scenarios (:data:`conformance_suite.scenarios.TASKS_SCENARIOS`) run against a route with tasks
on; a scenario the pinned suite ships as a stub (:data:`conformance_suite.scenarios.SUITE_STUBS`) must still
report exactly its one SKIPPED check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from node_tools import NODE_MODULES, NODE_TOOLS

from conformance_suite.scenarios import (
    NOT_APPLICABLE,
    REQUIRED_SCENARIOS,
    SCENARIOS,
    SUITE_STUBS,
    SUITE_VERSION,
    TASKS_SCENARIOS,
    NotApplicable,
    SuiteStub,
)
from conformance_suite.suite import SuiteRun, list_scenarios

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
NOT_PASSING = ("FAILURE", "WARNING")


def _describe(checks: list[dict[str, Any]]) -> str:
    return "\n".join(f"  {c['status']} {c['id']}: {c.get('errorMessage', '')}" for c in checks)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(suite_run: SuiteRun, scenario: str) -> None:
    result = suite_run.scenarios.get(scenario)
    assert result is not None, (
        f"the suite wrote no checks.json for {scenario} (results in {suite_run.out_dir}, "
        f"exit code {suite_run.returncode})\n{suite_run.output[-3000:]}"
    )
    assert result.checks, f"{scenario}: the suite ran no checks"
    excused = {entry.check: entry for entry in NOT_APPLICABLE if entry.scenario == scenario}
    failing = [c for c in result.with_status(*NOT_PASSING) if c["id"] not in excused]
    assert not failing, f"{scenario} fails through the gateway:\n{_describe(failing)}"
    for check_id, entry in excused.items():
        statuses = [c["status"] for c in result.checks if c["id"] == check_id]
        assert statuses == [entry.status], (
            f"{scenario}: not-applicable check {check_id} now reports {statuses}, not {entry.status}; "
            "update conformance_suite/scenarios.py and docs/conformance.md"
        )
    for stub in (stub for stub in SUITE_STUBS if stub.scenario == scenario):
        statuses = [c["status"] for c in result.checks if c["id"] == stub.check]
        assert statuses == ["SKIPPED"], (
            f"{scenario}: the suite's stub check {stub.check} now reports {statuses}, not SKIPPED: the scenario "
            "tests something now; remove its SUITE_STUBS entry (conformance_suite/scenarios.py, docs/conformance.md)"
        )


def test_the_scenario_list_is_the_one_the_pinned_suite_requires() -> None:
    assert tuple(list_scenarios()) == REQUIRED_SCENARIOS


def test_the_tasks_scenarios_are_every_tasks_scenario_of_the_pinned_suite() -> None:
    every = list_scenarios(requirements=None)
    assert sorted(name for name in every if name.startswith("tasks-")) == sorted(TASKS_SCENARIOS)


def test_the_suite_is_the_pinned_version() -> None:
    pinned = json.loads((NODE_TOOLS / "package.json").read_text())["dependencies"]
    installed = json.loads((NODE_MODULES / "@modelcontextprotocol" / "conformance" / "package.json").read_text())
    assert pinned["@modelcontextprotocol/conformance"] == installed["version"] == SUITE_VERSION


@pytest.mark.parametrize("entry", NOT_APPLICABLE, ids=[f"{e.scenario}:{e.check}" for e in NOT_APPLICABLE])
def test_every_not_applicable_check_is_documented(entry: NotApplicable) -> None:
    assert entry.scenario in SCENARIOS
    assert entry.status in NOT_PASSING
    assert entry.why.strip()
    assert "mdx:" in entry.spec
    assert f"| {entry.scenario} | `{entry.check}` ({entry.status}) |" in DOC.read_text(), (
        f"docs/conformance.md does not list {entry.scenario}:{entry.check}"
    )


@pytest.mark.parametrize("stub", SUITE_STUBS, ids=[stub.scenario for stub in SUITE_STUBS])
def test_every_suite_stub_is_documented(stub: SuiteStub) -> None:
    assert stub.scenario in SCENARIOS
    assert stub.why.strip()
    assert stub.covered_by.strip()
    assert f"| {stub.scenario} | `{stub.check}` (SKIPPED) |" in DOC.read_text(), (
        f"docs/conformance.md does not list the suite's stub {stub.scenario}"
    )
