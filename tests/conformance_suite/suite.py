"""Run the official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in
``tests/node-tools/package.json``) against the gateway in front of the legacy fixture server
(``tests/peers/conformance_fixture.py``), and read its per-scenario ``checks.json`` files.

One run starts the fixture server (``.venv-legacy``), an in-process gateway on a free loopback port,
and one ``conformance server --requirements 2026-07-28`` invocation for every scenario at once (the 37 the
revision requires, and the ones it runs unscored: pending scenarios and the tasks extension's).
By hand, from the repository root (results and the fixture server's log stay in DIR)::

    PYTHONPATH=tests .venv/bin/python -m conformance_suite.suite [--scenario NAME] [-o DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import route, running_gateway
from node_tools import CONFORMANCE, NODE, node_env
from peers.runner import PEERS_DIR, free_port, legacy_python, run_peer

from conformance_suite.scenarios import TASKS_SCENARIOS

REQUIREMENTS = "2026-07-28"
"""The spec revision whose frozen scenario list is run (``conformance list --requirements``)."""
SUITE_TIMEOUT = 300.0
"""Seconds one suite invocation may take before the run is abandoned (it takes well under a minute)."""
SCENARIO_TIMEOUT_MS = 30_000
_RESULT_DIR = re.compile(r"server-(?P<name>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z")

TASKS_ROUTE_CONFIG: dict[str, Any] = {
    "enabled": True,
    "default": {"mode": "off"},
    "without_extension": "sync",
    "tools": {
        "slow_compute": {"mode": "always"},
        "failing_job": {"mode": "always", "without_extension": "reject"},
        "protocol_error_job": {"mode": "always"},
        "confirm_delete": {"mode": "always"},
        "multi_input": {"mode": "always"},
        "test_tool_with_task": {"mode": "after", "after_ms": 500},
    },
}
"""The conformance route's ``tasks`` (issue 19 design, c.2). Every other fixture (``greet`` included) stays a
plain call. ``always``: the scenarios need a task even for ``slow_compute {seconds: 1}`` and a question asked
inside the task (``confirm_delete``, ``multi_input``). ``failing_job`` answers -32021 to a client without the
extension, as ``tasks-required-task-error`` expects of a tasks-only tool (no other scenario calls it without).
``test_tool_with_task`` asks first (an MRTR round, within the threshold) and becomes a task on the retry
that answers it, as ``tasks-mrtr-composition`` expects."""


@dataclass(frozen=True)
class Scenario:
    """One scenario's checks as the suite wrote them (``checks.json``)."""

    name: str
    checks: list[dict[str, Any]]

    def with_status(self, *statuses: str) -> list[dict[str, Any]]:
        return [check for check in self.checks if check.get("status") in statuses]


@dataclass
class SuiteRun:
    """Everything one suite invocation produced."""

    scenarios: dict[str, Scenario]
    listed: list[str]
    output: str
    returncode: int
    seconds: float
    out_dir: Path
    logs: list[Path] = field(default_factory=list)


def check_node_tools() -> None:
    """Fail (never skip) when the pinned Node tools are missing: bootstrap installs them in CI."""
    missing = [str(path) for path in (NODE, CONFORMANCE) if not path.exists()]
    if missing:
        raise RuntimeError(
            "the official conformance suite is not installed (missing: " + ", ".join(missing) + "); "
            "run `bash scripts/bootstrap.sh` from the repository root"
        )


def list_scenarios(requirements: str | None = REQUIREMENTS) -> list[str]:
    """The server scenarios the suite requires for ``requirements``, in the suite's order; with None,
    every server scenario the suite has (extension scenarios included)."""
    check_node_tools()
    selection = ["--requirements", requirements] if requirements is not None else ["--server"]
    listing = subprocess.run(
        [str(NODE), str(CONFORMANCE), "list", *selection],
        env=node_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    names: list[str] = []
    in_server_section = False
    for line in listing.splitlines():
        if line.startswith("Server scenarios"):
            in_server_section = True
        elif line and not line.startswith(" "):
            in_server_section = False
        elif in_server_section and line.strip().startswith("- "):
            # The full listing tags each name with where it belongs ("- tasks-lifecycle [extension]").
            names.append(line.strip()[2:].split(" [", 1)[0].strip())
    return names


def read_results(out_dir: Path) -> dict[str, Scenario]:
    """Every ``checks.json`` under ``out_dir``, keyed by scenario name (its directory's name)."""
    scenarios: dict[str, Scenario] = {}
    for path in sorted(out_dir.glob("*/checks.json")):
        # The suite names each directory server-<scenario>-<ISO timestamp with dashes>.
        match = _RESULT_DIR.fullmatch(path.parent.name)
        if match is not None:
            scenarios[match["name"]] = Scenario(match["name"], json.loads(path.read_text()))
    return scenarios


def suite_argv(url: str, out_dir: Path, scenario: str | None) -> list[str]:
    """One ``conformance server`` invocation: every scenario ``REQUIREMENTS`` requires (``scenario`` None),
    or one scenario by name."""
    argv = [str(NODE), str(CONFORMANCE), "server", "--url", url, "--timeout", str(SCENARIO_TIMEOUT_MS)]
    argv += ["-o", str(out_dir)]
    if scenario is None:
        return [*argv, "--requirements", REQUIREMENTS]  # fixes the scenario set and the wire revision
    if scenario in TASKS_SCENARIOS:
        # An extension scenario is on no spec timeline: --spec-version would skip it ("Use --force"). Without
        # it the suite speaks 2026-07-28 for an extension scenario, as --requirements does.
        return [*argv, "--scenario", scenario]
    return [*argv, "--scenario", scenario, "--spec-version", REQUIREMENTS]


async def _run_suite_against(url: str, out_dir: Path, scenario: str | None) -> tuple[int, str]:
    argv = suite_argv(url, out_dir, scenario)
    proc = await asyncio.create_subprocess_exec(
        *argv, env=node_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        stdout, _ = await asyncio.wait_for(proc.communicate(), SUITE_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, stdout.decode(errors="replace")


def gateway_routes(backend_url: str) -> list[dict[str, Any]]:
    """The gateway's one route, ``/mcp``, in front of the fixture server, with tasks on for the tasks tools."""
    return [route("conformance", "/mcp", backend_url, tasks=TASKS_ROUTE_CONFIG)]


def run_suite(out_dir: Path, log_dir: Path, *, scenario: str | None = None) -> SuiteRun:
    """Start the fixture server and a gateway, run the suite once, read every scenario's checks.

    Synchronous (the gateway runs in an event loop of its own for the duration), so a
    session-scoped pytest fixture can call it."""
    check_node_tools()
    listed = list_scenarios() if scenario is None else [scenario]
    out_dir.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [legacy_python(), str(PEERS_DIR / "conformance_fixture.py"), "--port", str(port)]

    async def main() -> tuple[int, str]:
        async with running_gateway(gateway_routes(f"http://127.0.0.1:{port}/mcp")) as gateway:
            return await _run_suite_against(gateway.url("/mcp"), out_dir, scenario)

    started = time.monotonic()
    with run_peer("conformance-fixture", argv, port, log_dir):
        returncode, output = asyncio.run(main())
    seconds = time.monotonic() - started
    return SuiteRun(
        scenarios=read_results(out_dir),
        listed=listed,
        output=output,
        returncode=returncode,
        seconds=seconds,
        out_dir=out_dir,
        logs=sorted(log_dir.glob("*.log")),
    )


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the official conformance suite against the gateway.")
    parser.add_argument("--scenario", help="one scenario (default: every scenario the revision requires)")
    parser.add_argument("-o", "--output-dir", type=Path, default=Path("conformance-results"))
    args = parser.parse_args(argv)
    run = run_suite(args.output_dir, args.output_dir / "logs", scenario=args.scenario)
    print(run.output)
    for name, result in sorted(run.scenarios.items()):
        failed = result.with_status("FAILURE")
        warned = result.with_status("WARNING")
        print(f"{name}: {len(failed)} failed, {len(warned)} warnings")
        for check in failed + warned:
            print(f"  {check['status']} {check['id']}: {check.get('errorMessage', '')}")
    print(f"suite took {run.seconds:.1f}s; results in {run.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
