"""One run of the official conformance suite per test session, shared by every scenario's test.

The run starts the legacy fixture server (``tests/peers/conformance_fixture.py``, mcp 1.30.0), an
in-process gateway on a free loopback port in front of it, and one ``conformance server
--requirements 2026-07-28`` invocation for every scenario (see ``suite.py``)."""

from __future__ import annotations

import pytest

from conformance_suite.suite import SuiteRun, run_suite


@pytest.fixture(scope="session")
def suite_run(tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    base = tmp_path_factory.mktemp("conformance-suite")
    return run_suite(base / "results", base / "logs")
