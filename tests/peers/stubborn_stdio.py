"""A stdio MCP server that outlives its client unless something kills it (issue 20 item 1).

Like ``server-everything`` once initialized, it ignores the end of its stdin, and it ignores
SIGTERM and SIGHUP; it also starts a child of its own in its process group (as ``npx`` starts
``node``), which sleeps. Only SIGKILL ends either. Standard library only (it starts in about 30 ms).

Environment: ``STUBBORN_PIDS`` - a file each process appends ``<server pid> <child pid>`` to;
``STUBBORN_MODE=leave`` - the server itself exits at the end of stdin, leaving its child behind.
Tools: ``echo`` (``text`` → ``echo=<text>``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "stubborn", "version": "1"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return {"tools": [{"name": "echo", "description": "Echoes text.", "inputSchema": schema}]}
    if method == "tools/call":
        text = (params.get("arguments") or {}).get("text", "")
        return {"content": [{"type": "text", "text": f"echo={text}"}], "isError": False}
    return None


def main() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    child = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"]
        if os.environ.get("STUBBORN_MODE") != "leave"
        else [sys.executable, "-c", "import time; time.sleep(600)"]
    )
    if path := os.environ.get("STUBBORN_PIDS"):
        with open(path, "a", encoding="utf-8") as pids:
            pids.write(f"{os.getpid()} {child.pid}\n")
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if "id" not in request or "method" not in request:
            continue
        result = answer(request)
        if result is None:
            send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "unknown method"}})
        else:
            send({"jsonrpc": "2.0", "id": request["id"], "result": result})
    if os.environ.get("STUBBORN_MODE") == "leave":
        os._exit(0)  # the child stays behind, in the process group
    threading.Event().wait()  # stdin ended: ignored, as server-everything does


if __name__ == "__main__":
    main()
