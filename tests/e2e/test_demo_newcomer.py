"""The demo as a newcomer meets it: what the banner prints runs as printed.

The demo is started as a user starts it (``python -m gateway demo``, a subprocess) and the banner's
Python example and curl pair are taken from its output, not from the functions that build them,
and run: the example with the exact command the banner names, the curl pair with bash. The demo
logs one line per request at info, and a busy port is one line, not a traceback.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import socket
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from peers.runner import free_port

from gateway.demo import run as demo_run

WAIT = 60.0


@dataclass
class Demo:
    process: asyncio.subprocess.Process
    banner: str
    stderr: list[str] = field(default_factory=list)


async def _read_banner(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    lines: list[str] = []
    while True:
        raw = await process.stdout.readline()
        if not raw:
            raise AssertionError("the demo exited before its banner ended:\n" + "".join(lines))
        line = raw.decode()
        if line.startswith("Press Ctrl-C"):
            return "".join(lines)
        lines.append(line)


async def _start_demo(port: int, *extra: str) -> asyncio.subprocess.Process:
    """``python -m gateway demo --port PORT ...`` as a user starts it, stdin closed, output piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "demo",
        "--port",
        str(port),
        *extra,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@asynccontextmanager
async def running_demo(*extra: str) -> AsyncIterator[Demo]:
    process = await _start_demo(free_port(), *extra)
    try:
        async with asyncio.timeout(WAIT):
            banner = await _read_banner(process)
        yield Demo(process, banner)
    finally:
        if process.returncode is None:
            process.terminate()
        async with asyncio.timeout(WAIT):
            await process.wait()


def _block(banner: str, after: str, until: str) -> str:
    """The indented block of the banner between the line containing ``after`` and the one containing ``until``."""
    text = banner.split(after, 1)[1].split("\n", 1)[1]
    return textwrap.dedent(text.split(until, 1)[0].rsplit("\n", 1)[0] if until else text)


async def _run(*argv: str, cwd: Path) -> tuple[int, str]:
    child = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    async with asyncio.timeout(WAIT):
        out, _ = await child.communicate()
    assert child.returncode is not None
    return child.returncode, out.decode()


async def test_the_printed_python_example_runs_with_the_printed_command(tmp_path: Path) -> None:
    async with running_demo() as demo:
        example = _block(demo.banner, "Save this as client.py:", "and run it with")
        assert "has the SDK" in demo.banner, "the test environment has mcp 2.3.0, and the banner must say so"
        command = _block(demo.banner, "and run it with", "Or with curl").strip()
        (tmp_path / "client.py").write_text(example)
        assert command == f"{sys.executable} client.py"
        code, out = await _run(*command.split(" "), cwd=tmp_path)
    assert code == 0, out
    assert "ask_two" in out
    assert "server asks: What is your name?" in out
    assert out.rstrip().endswith("name=Ada;color=teal")


async def test_the_printed_curl_pair_shows_one_input_required_round_and_its_retry(tmp_path: Path) -> None:
    async with running_demo() as demo:
        pair = _block(demo.banner, "question, so the first call", "")
        (tmp_path / "pair.sh").write_text(pair)
        code, out = await _run("bash", "-euo", "pipefail", "pair.sh", cwd=tmp_path)
    assert code == 0, out
    first, second = out.strip().split("\n")
    assert '"resultType":"input_required"' in first
    assert '"elicit-1":{"method":"elicitation/create"' in first
    assert '"resultType":"complete"' in second
    assert '"text":"city=Lisbon"' in second


README = Path(__file__).resolve().parents[2] / "README.md"
README_URL = "URL=http://127.0.0.1:8080/mcp\n"


def _readme_task_block() -> str:
    """The ``sh`` block of the README's "A task in the demo" section, as a newcomer copies it."""
    section = README.read_text().split("\n## A task in the demo\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    assert block.startswith(README_URL), "the block names the demo's default URL first"
    return block


async def test_the_readme_task_flow_runs_against_the_demo(tmp_path: Path) -> None:
    async with running_demo() as demo:
        url = re.search(r"mrtr-gateway \(MCP 2026-07-28\):\s+(\S+)", demo.banner)
        assert url is not None, demo.banner
        script = _readme_task_block().replace(README_URL, f"URL={url.group(1)}\n", 1)
        (tmp_path / "task.sh").write_text(script)
        code, out = await _run("bash", "-euo", "pipefail", "task.sh", cwd=tmp_path)
    assert code == 0, out
    lines = out.strip().split("\n")
    created = json.loads(lines[0])["result"]
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert created["taskId"].startswith("t1.")
    assert created["pollIntervalMs"] == 1000
    statuses = lines[1:-1]
    assert statuses[-1] == "completed step 5 of 5", out
    assert all(line.startswith("working") for line in statuses[:-1]), out
    assert any(re.fullmatch(r"working step [1-4] of 5", line) for line in statuses), "progress shows while it works"
    final = json.loads(lines[-1])["result"]
    assert final["resultType"] == "complete"
    assert final["taskId"] == created["taskId"]
    assert final["status"] == "completed"
    assert final["result"]["content"] == [{"type": "text", "text": "report=ready;steps=5"}]
    assert final["result"]["isError"] is False


async def test_the_demo_logs_one_line_per_request_at_info() -> None:
    process = await _start_demo(0, "--walk", "ask_two")
    async with asyncio.timeout(WAIT):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert "← complete: name=Ada;color=teal" in out.decode()
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert len(lines) == 3, "three rounds of tools/call, one line each:\n" + "\n".join(lines)
    assert all("info" in line and "tools/call" in line for line in lines), lines
    rounds = [re.search(r"\bround=(\d+)", line) for line in lines]
    assert [int(m.group(1)) if m else None for m in rounds] == [1, 2, 3], "each line names its round trip"
    holds = {m.group(1) for line in lines if (m := re.search(r"\bhold=(\w+)", line))}
    assert len(holds) == 1, "the three rounds of one call join on one hold digest"


async def test_a_busy_port_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        child = await _start_demo(port)
        async with asyncio.timeout(WAIT):
            _, err = await child.communicate()
    assert child.returncode == 2
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert f"127.0.0.1:{port}" in lines[0]
    assert "--port" in lines[0]


def test_without_the_sdk_the_banner_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert demo_run._has_sdk() == f"needs the SDK first: {sys.executable} -m pip install 'mcp==2.3.0'"
