"""The image's PID 1 reaps what stdio backends leave behind.

In a container the entrypoint is PID 1, and every orphaned process is re-parented to it. A stdio
backend that starts a helper and exits without waiting for it leaves that helper to PID 1; if PID 1
is the gateway (which waits only for its own children), each such helper stays a zombie for the
life of the pod. These tests run the gateway as PID 1 of a fresh PID namespace (``unshare``, as a
container runtime does), once bare and once under the Dockerfile's ENTRYPOINT, and count zombies.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import pytest
import yaml
from harness import MODERN, BareClient
from waiting import eventually_sync, until_status

REPO_ROOT = Path(__file__).resolve().parents[2]
SESSIONS = 3
DEADLINE = 30.0

SERVER = """
import json, subprocess, sys
subprocess.Popen(["sleep", "0"])  # a helper this server never waits for
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    method, result = msg["method"], {}
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "orphan-maker", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "hi", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "hi"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, check=False, timeout=10)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _can_unshare(), reason="needs `unshare --pid` (root or user namespaces)")


def entrypoint() -> list[str]:
    """The Dockerfile's ENTRYPOINT, with its programs mapped to this checkout's."""
    text = (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8")
    (args,) = re.findall(r"^ENTRYPOINT (\[.*\])$", text, flags=re.MULTILINE)
    mapped = {"dumb-init": [str(Path(sys.executable).with_name("dumb-init"))], "mrtr-gateway": gateway_argv()}
    return [part for arg in json.loads(args) for part in mapped.get(arg, [arg])]


def gateway_argv() -> list[str]:
    return [sys.executable, "-m", "gateway"]


def processes() -> dict[int, tuple[str, int]]:
    """pid -> (state, parent pid) of every process visible here."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            out[int(entry.name)] = (fields[0], int(fields[1]))
    return out


def descendants(root: int) -> dict[int, str]:
    table = processes()
    found, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (state, ppid) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = state
                frontier.append(pid)
    return found


def poll(predicate: Callable[[], bool], what: str, root: int) -> None:
    eventually_sync(predicate, what=lambda: f"{what}; processes under it: {descendants(root)}", timeout=DEADLINE)


@contextmanager
def gateway_as_pid_1(command: list[str], tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    server = tmp_path / "server.py"
    server.write_text(SERVER, encoding="utf-8")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = tmp_path / "gateway.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "state": {"keys": ["k" * 43]},
                "listen": {"host": "127.0.0.1", "port": port},
                "logging": {"json": True, "level": "warning"},
                "routes": [
                    {
                        "name": "local",
                        "path": "/mcp",
                        "backend": {
                            "transport": "stdio",
                            "command": [sys.executable, str(server)],
                            "session_idle": 0.2,
                            "prewarm": 0,  # one process per session: the zombies counted are theirs
                        },
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    argv = ["unshare", "--pid", "--fork", "--kill-child", *command, "serve", "--config", str(config)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MRTR_GATEWAY_")}
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc, f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()  # unshare ignores SIGTERM; --kill-child takes the namespace down with it
        proc.wait(timeout=DEADLINE)


async def run_sessions(url: str) -> None:
    """One stdio session per credential; each ends once idle, and its server exits."""
    async with aiohttp.ClientSession() as http:
        client = BareClient(http, url)
        await until_status(http, url.replace("/mcp", "/healthz"), timeout=DEADLINE)  # the gateway started
        for index in range(SESSIONS):
            reply = await client.call_tool("hi", authorization=f"Bearer user-{index}")
            assert reply.result["content"][0]["text"] == "hi", reply.body
            assert reply.headers.get("MCP-Protocol-Version", MODERN) == MODERN


def servers_gone_and(root: int, zombies: range) -> Callable[[], bool]:
    def check() -> bool:
        tree = descendants(root)
        return sum(1 for state in tree.values() if state == "Z") in zombies and not any(
            state != "Z" and pid_runs_server(pid) for pid, state in tree.items()
        )

    return check


def pid_runs_server(pid: int) -> bool:
    try:
        return b"server.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_without_an_init_each_stdio_session_leaves_a_zombie(tmp_path: Path) -> None:
    """The fault the image's init exists for: shown here so the next test cannot pass vacuously."""
    with gateway_as_pid_1(gateway_argv(), tmp_path) as (proc, url):
        asyncio.run(run_sessions(url))
        poll(servers_gone_and(proc.pid, range(1, SESSIONS + 1)), "zombies under a bare gateway", proc.pid)


def test_the_image_entrypoint_reaps_every_orphan(tmp_path: Path) -> None:
    with gateway_as_pid_1(entrypoint(), tmp_path) as (proc, url):
        asyncio.run(run_sessions(url))
        poll(servers_gone_and(proc.pid, range(1)), "every stdio server gone and no zombie left", proc.pid)
        assert proc.poll() is None
