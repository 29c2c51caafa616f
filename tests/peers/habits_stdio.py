"""A stdio MCP server with two habits of published servers that a gateway must live with (standard
library only: it starts in about 30 ms).

* ``HABIT_ROOTS_AT_START=wait``: it sends ``roots/list`` as soon as ``notifications/initialized``
  arrives and answers nothing but ``ping`` until that is answered (a server that needs its roots
  before it serves; ``mcp-shrimp-task-manager`` 1.0.21 asks inside ``tools/list`` and waits the
  same way). ``=ask``: it asks at the same moment but serves meanwhile (``server-filesystem``).
* ``HABIT_PORT=<port>``: before it serves it binds ``127.0.0.1:<port>`` and exits (code 1, the
  error on stderr) when the port is taken, as ``@pollinations/mcp-server-sqlite`` 0.6.6 binds its
  HTTP port; like that server (whose listener keeps Node's loop alive) it then outlives the end of
  its stdin, until SIGTERM.

Tools: ``startup_roots`` (what the start-up ``roots/list`` was answered, without waiting for it),
``ask_roots`` (asks ``roots/list`` from inside the tool), ``work`` (``seconds``, ``text``: sleeps,
then answers ``pid=<pid> text=<text>``). Requests run in threads, so pings are answered meanwhile.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any

ANSWER_WAIT = 120.0
"""Seconds the server waits for the answer to a request of its own (bounded, like every wait)."""
WORK_MAX = 30.0
STARTUP_ID = "startup"

_write = threading.Lock()
_ids = iter(range(1, 1_000_000))
_answers: dict[int, dict[str, Any]] = {}
_answered = threading.Condition()
_startup: dict[str, Any] = {}
_started = threading.Event()


def send(message: dict[str, Any]) -> None:
    with _write:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def ask(method: str) -> dict[str, Any]:
    """Send a request to the client and wait for its answer (the whole JSON-RPC response)."""
    request_id = next(_ids)
    send({"jsonrpc": "2.0", "id": f"s{request_id}", "method": method, "params": {}})
    with _answered:
        _answered.wait_for(lambda: request_id in _answers, timeout=ANSWER_WAIT)
        return _answers.pop(request_id, {"error": {"message": "no answer"}})


def roots_text(answer: dict[str, Any]) -> str:
    if "result" not in answer:
        return "roots failed"
    return "roots=" + ",".join(root["uri"] for root in answer["result"].get("roots", []))


def tool(name: str, arguments: dict[str, Any]) -> str:
    if name == "startup_roots":
        return roots_text(_startup["answer"]) if "answer" in _startup else "roots pending"
    if name == "ask_roots":
        return roots_text(ask("roots/list"))
    if name == "work":
        time.sleep(min(float(arguments.get("seconds", 0)), WORK_MAX))
        return f"pid={os.getpid()} text={arguments.get('text', '')}"
    raise KeyError(name)


def result(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "habits", "version": "1"},
        }
    if method == "tools/list":
        schema = {"type": "object", "properties": {"seconds": {"type": "number"}, "text": {"type": "string"}}}
        names = ("startup_roots", "ask_roots", "work")
        return {"tools": [{"name": name, "inputSchema": schema} for name in names]}
    if method == "tools/call":
        text = tool(str(params.get("name")), params.get("arguments") or {})
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return None


def serve(request: dict[str, Any]) -> None:
    if os.environ.get("HABIT_ROOTS_AT_START") == "wait" and request["method"] != "initialize":
        _started.wait(ANSWER_WAIT)
    try:
        answer = result(request["method"], request.get("params") or {})
    except KeyError:
        answer = None
    if answer is None:
        send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "unknown"}})
    else:
        send({"jsonrpc": "2.0", "id": request["id"], "result": answer})


def take(message: dict[str, Any]) -> None:
    """One message from the client: an answer to one of ours, a notification or a request."""
    method = message.get("method")
    if method is None:
        request_id = str(message.get("id", ""))
        if request_id == STARTUP_ID:  # taken before the next line is read: a call behind it sees it
            _startup["answer"] = message
            _started.set()
        elif request_id.startswith("s") and request_id[1:].isdigit():
            with _answered:
                _answers[int(request_id[1:])] = message
                _answered.notify_all()
        return
    if "id" not in message:
        if method == "notifications/initialized" and os.environ.get("HABIT_ROOTS_AT_START"):
            send({"jsonrpc": "2.0", "id": STARTUP_ID, "method": "roots/list", "params": {}})
        return
    if method == "ping":
        send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        return
    threading.Thread(target=serve, args=(message,), daemon=True).start()


def main() -> None:
    listener = None
    if port := os.environ.get("HABIT_PORT"):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", int(port)))
        except OSError as exc:
            sys.exit(f"habits: cannot listen on 127.0.0.1:{port}: {exc}")
        listener.listen()
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            take(message)
    if listener is not None:
        threading.Event().wait()  # its listener keeps it running: only a signal ends it


if __name__ == "__main__":
    main()
