"""Nothing lost when a replica dies (issue 26): three real gateway replicas (``python -m gateway
serve``) in front of one legacy FastMCP server (mcp 1.30.0), 16 clients running the two-round
``ask_two`` through a balancer with no affinity, one replica killed (SIGKILL) and restarted, another
drained (SIGTERM) and restarted, during 30 s of load. The client, the faults and the verdict are
:mod:`bench.chaos`'s (``python -m bench.chaos`` runs the 100-client version).

The verdict: on the ``holds.on_lost: replay`` route no flow is wrong and none is lost (a retry
whose owner died is replayed; a resend of a retry gets the first answer); on the ``error`` route no
flow is wrong, and every lost one was held by the killed process and got the documented
``hold_lost``. Counts, not timings; the run cannot pass vacuously: enough flows complete, and flows
of both routes are in flight when each signal comes.

``MRTR_CHAOS_GATEWAY_SRC=DIR`` runs the replicas from the gateway package in DIR (e.g. ``git archive
HEAD gateway | tar -x -C DIR``) instead of this tree's: the same verdict before and after a change."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from harness import TEST_KEY
from peers.runner import free_port, legacy_argv, legacy_url, run_peer

from bench.chaos import Settings, coverage_problems, problems, render, run

pytestmark = pytest.mark.interop

SETTINGS = Settings(
    replicas=3,
    clients=16,
    seconds=30.0,
    kill_at=7.0,
    kill_down=3.0,
    drain_at=17.0,
    drain_timeout=3.0,
    state_key=TEST_KEY,
    seed=26,
)
MIN_RIGHT = 40
"""Flows each route must complete right over the run (a few hundred do on a quiet 2-core machine)."""
MIN_IN_WINDOW = 10
"""Flows each route completes right within each fault's window (signal to restarted and ready)."""
MIN_IN_FLIGHT = 2
"""Flows of each route running when each signal comes (8 clients per route keep about 8 running)."""


@pytest.fixture
def chaos_backend(peer_log_dir: Path) -> Iterator[str]:
    """A legacy peer of this test's own: killed replicas leave their backend sessions behind in it."""
    port = free_port()
    with run_peer("legacy-chaos", legacy_argv(port, log_level="WARNING"), port, peer_log_dir):
        yield legacy_url(port, "streamable-http")


async def test_nothing_is_lost_when_a_replica_dies(chaos_backend: str, tmp_path: Path) -> None:
    src = os.environ.get("MRTR_CHAOS_GATEWAY_SRC")
    settings = replace(SETTINGS, log_dir=tmp_path / "replicas", gateway_src=Path(src) if src else None)
    report = await run(chaos_backend, settings)
    print(render(report))  # shown with the failure; the replicas' logs stay in tmp_path/replicas
    vacuous = coverage_problems(report, min_right=MIN_RIGHT, min_in_window=MIN_IN_WINDOW, min_in_flight=MIN_IN_FLIGHT)
    assert not vacuous, render(report)
    verdict = problems(report)
    assert not verdict, render(report)
