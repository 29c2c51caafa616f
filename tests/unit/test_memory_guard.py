"""The stdio memory guard's parts (``gateway.legacy.memory``): the cgroup readers against directories
laid out as cgroup v1 and v2 are, the process-tree RSS walk and the guard's choices against real
processes, and the configuration keys."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from waiting import eventually

from gateway.config.load import ConfigError, parse_config
from gateway.config.model import RouteConfig
from gateway.errors import Overloaded
from gateway.legacy.memory import (
    CONTAINER_MEMORY,
    KILL_REASONS,
    ROUTE_MAX_MEMORY,
    Reading,
    StdioMemoryGuard,
    read_cgroup,
    tree_rss,
)
from gateway.legacy.starts import tree_cpu_ticks

MIB = 1 << 20
V1_UNLIMITED = 9223372036854771712  # what an unlimited cgroup v1 group reads
# A process that allocates (and writes) MIB_ARG MiB, starts a child that allocates CHILD_MIB, prints
# both pids and waits: a server with a child of its own (npx -> node).
TREE = """
import subprocess, sys, time
kept = b"\\x01" * (int(sys.argv[1]) << 20)
child = subprocess.Popen([sys.executable, "-c",
    "import sys, time; kept = b'\\\\x01' * (int(sys.argv[1]) << 20); print('ready', flush=True); time.sleep(120)",
    sys.argv[2]], stdout=subprocess.PIPE)
child.stdout.readline()
print(child.pid, flush=True)
time.sleep(120)
"""


def v2(root: Path, limit: str, current: int, inactive: int) -> Path:
    (root / "memory.max").write_text(limit + "\n")
    (root / "memory.current").write_text(f"{current}\n")
    (root / "memory.stat").write_text(f"anon 1\nactive_file 7\ninactive_file {inactive}\nfile_dirty 0\n")
    return root


def v1(root: Path, limit: int, usage: int, inactive: int) -> Path:
    memory = root / "memory"
    memory.mkdir()
    (memory / "memory.limit_in_bytes").write_text(f"{limit}\n")
    (memory / "memory.usage_in_bytes").write_text(f"{usage}\n")
    # a group's own inactive_file differs from its hierarchy's: the kubelet subtracts the total
    (memory / "memory.stat").write_text(f"cache 9\ninactive_file 5\ntotal_cache 9\ntotal_inactive_file {inactive}\n")
    return root


def test_cgroup_v2_working_set_is_usage_minus_inactive_file(tmp_path: Path) -> None:
    reading = read_cgroup(v2(tmp_path, str(512 * MIB), 400 * MIB, 100 * MIB))
    assert reading == Reading(working_set=300 * MIB, limit=512 * MIB)
    assert reading.at_least(0.5)
    assert not reading.at_least(0.6)


def test_cgroup_v2_without_a_limit(tmp_path: Path) -> None:
    reading = read_cgroup(v2(tmp_path, "max", 400 * MIB, 500 * MIB))
    assert reading == Reading(working_set=0, limit=None), "never below 0; no limit"
    assert not reading.at_least(0.0)


def test_cgroup_v1_working_set_uses_the_hierarchys_inactive_file(tmp_path: Path) -> None:
    assert read_cgroup(v1(tmp_path, 256 * MIB, 200 * MIB, 50 * MIB)) == Reading(150 * MIB, 256 * MIB)


def test_cgroup_v1_without_a_limit(tmp_path: Path) -> None:
    assert read_cgroup(v1(tmp_path, V1_UNLIMITED, 200 * MIB, 50 * MIB)) == Reading(150 * MIB, None)


def test_v2_is_read_before_v1_and_no_files_is_no_reading(tmp_path: Path) -> None:
    assert read_cgroup(tmp_path) is None, "no cgroup files: the container part is off"
    v1(tmp_path, 256 * MIB, 200 * MIB, 0)
    v2(tmp_path, str(128 * MIB), 100 * MIB, 0)
    assert read_cgroup(tmp_path) == Reading(100 * MIB, 128 * MIB)
    (tmp_path / "memory.current").write_text("garbage\n")
    assert read_cgroup(tmp_path) == Reading(200 * MIB, 256 * MIB), "v2 unreadable: v1"


@contextlib.asynccontextmanager
async def process_tree(mib: int, child_mib: int) -> AsyncIterator[tuple[asyncio.subprocess.Process, int]]:
    """A process of ``mib`` MiB with a child of ``child_mib`` MiB, in a process group of its own."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", TREE, str(mib), str(child_mib), stdout=asyncio.subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        child = int(await asyncio.wait_for(proc.stdout.readline(), 30))
        yield proc, child
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


def rss_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def test_tree_rss_adds_up_a_process_and_its_descendants() -> None:
    async with process_tree(40, 30) as (proc, child):
        total = tree_rss(proc.pid)
        assert total is not None
        assert total >= 70 * MIB
        assert total == pytest.approx(rss_of(proc.pid) + rss_of(child), rel=0.05)
        assert tree_rss(child) == pytest.approx(rss_of(child), rel=0.05)
        assert tree_cpu_ticks(proc.pid) is not None, "the CPU walk shares it"
    assert tree_rss(proc.pid) is None, "a reaped process: gone"
    assert tree_cpu_ticks(proc.pid) is None


def stdio_route(name: str, **backend: Any) -> RouteConfig:
    config = {"transport": "stdio", "command": ["server"], **backend}
    return RouteConfig.model_validate({"name": name, "path": f"/{name}", "backend": config})


def guard_over(root: Path, fraction: float, killed: list[tuple[str, str]]) -> StdioMemoryGuard:
    v2(root, str(1024 * MIB), int(fraction * 1024 * MIB), 0)
    return StdioMemoryGuard(high=0.85, kill=0.95, retry_after=2, root=root, on_kill=lambda *k: killed.append(k))


async def test_past_kill_the_largest_tree_goes_first_one_per_check(tmp_path: Path) -> None:
    killed: list[tuple[str, str]] = []
    guard = guard_over(tmp_path, 0.96, killed)
    async with process_tree(10, 10) as (small, _), process_tree(60, 10) as (large, large_child):
        guard.route(stdio_route("small")).started(small)
        guard.route(stdio_route("large")).started(large)
        guard.check()
        assert killed == [("large", CONTAINER_MEMORY)]
        await asyncio.wait_for(large.wait(), 10)
        await eventually(lambda: tree_rss(large_child) is None, what="its group went with it", timeout=10)
        guard.check()
        assert killed == [("large", CONTAINER_MEMORY), ("small", CONTAINER_MEMORY)], "one per check"
        await asyncio.wait_for(small.wait(), 10)
        guard.check()
        assert not guard.servers, "reaped servers are forgotten"


async def test_past_high_starts_are_refused_and_nothing_is_killed(tmp_path: Path) -> None:
    killed: list[tuple[str, str]] = []
    guard = guard_over(tmp_path, 0.9, killed)
    watch = guard.route(stdio_route("r"))
    with pytest.raises(Overloaded) as refused:
        watch.admit()
    assert refused.value.to_error()["data"] == {"reason": "overloaded", "cause": "memory_high", "retryAfter": 2}
    async with process_tree(30, 1) as (proc, _):
        watch.started(proc)
        guard.check()
        assert not killed
        v2(tmp_path, str(1024 * MIB), 100 * MIB, 0)
        watch.admit()  # under high again


async def test_a_tree_past_its_routes_max_memory_is_killed_without_a_container_limit(tmp_path: Path) -> None:
    killed: list[tuple[str, str]] = []
    guard = StdioMemoryGuard(high=0.85, kill=0.95, retry_after=2, root=tmp_path, on_kill=lambda *k: killed.append(k))
    # each process is about 10 MiB of interpreter plus what it allocates
    async with process_tree(40, 40) as (over, _), process_tree(40, 1) as (under, _):
        guard.route(stdio_route("bounded", max_memory=80 * MIB)).started(over)
        guard.route(stdio_route("bounded", max_memory=80 * MIB)).started(under)
        ended = await asyncio.create_subprocess_exec("true")
        guard.route(stdio_route("unbounded")).started(ended)
        guard.check()
        assert killed == [("bounded", ROUTE_MAX_MEMORY)], "the tree (2 x 50 MiB), not a process, counts"
        await asyncio.wait_for(over.wait(), 10)
        assert under.returncode is None
        await ended.wait()
    assert set(KILL_REASONS) == {CONTAINER_MEMORY, ROUTE_MAX_MEMORY}


def settings(limits: dict[str, Any], backend: dict[str, Any]) -> None:
    route = {"name": "r", "path": "/mcp", "backend": backend}
    parse_config({"state": {"keys": ["k" * 32]}, "limits": limits, "routes": [route]}, env={})


def test_the_configuration_keys() -> None:
    stdio = {"transport": "stdio", "command": ["server"]}
    settings({"stdio_memory_high": 0.7, "stdio_memory_kill": 0.7}, {**stdio, "max_memory": 64 * MIB})
    with pytest.raises(ConfigError, match="stdio_memory_kill must be at least stdio_memory_high"):
        settings({"stdio_memory_high": 0.9, "stdio_memory_kill": 0.8}, stdio)
    with pytest.raises(ConfigError, match=r"limits\.stdio_memory_high"):
        settings({"stdio_memory_high": 1.5}, stdio)
    with pytest.raises(ConfigError, match=r"backend\.max_memory: only allowed when transport is stdio"):
        settings({}, {"url": "http://127.0.0.1:1/mcp", "max_memory": 64 * MIB})
    with pytest.raises(ConfigError, match=r"backend\.max_memory"):
        settings({}, {**stdio, "max_memory": 512})
