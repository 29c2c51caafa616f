"""A stdio MCP server whose memory a test controls (the stdio memory guard, ``gateway.legacy.memory``).

Standard library only (it starts in about 30 ms, about 10 MB resident). Tools:

* ``pid`` - answers ``pid=<pid>``;
* ``grow`` (``mib``, ``hold``) - allocates ``mib`` MiB and writes every page (so it is resident), keeps
  it for the rest of the process's life, then waits ``hold`` seconds (at most 60) before answering
  ``pid=<pid> grown=<mib>``.

Requests run in threads, so pings are answered while a tool works.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

HOLD_MAX = 60.0

_write = threading.Lock()
_kept: list[bytes] = []


def send(message: dict[str, Any]) -> None:
    with _write:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def tool(name: str, arguments: dict[str, Any]) -> str:
    if name == "pid":
        return f"pid={os.getpid()}"
    if name == "grow":
        mib = int(arguments.get("mib", 0))
        _kept.append(b"\x01" * (mib << 20))  # written, not just reserved: every page is resident
        time.sleep(min(float(arguments.get("hold", 0)), HOLD_MAX))
        return f"pid={os.getpid()} grown={mib}"
    raise KeyError(name)


def result(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "memory", "version": "1"},
        }
    if method == "tools/list":
        schema = {"type": "object", "properties": {"mib": {"type": "integer"}, "hold": {"type": "number"}}}
        return {"tools": [{"name": name, "inputSchema": schema} for name in ("pid", "grow")]}
    if method == "tools/call":
        text = tool(str(params.get("name")), params.get("arguments") or {})
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return None


def serve(request: dict[str, Any]) -> None:
    try:
        answer = result(request["method"], request.get("params") or {})
    except KeyError:
        answer = None
    if answer is None:
        send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "unknown"}})
    else:
        send({"jsonrpc": "2.0", "id": request["id"], "result": answer})


def main() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "id" not in message or "method" not in message:
            continue  # a notification, or an answer (this server asks nothing)
        if message["method"] == "ping":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        else:
            threading.Thread(target=serve, args=(message,), daemon=True).start()


if __name__ == "__main__":
    main()
