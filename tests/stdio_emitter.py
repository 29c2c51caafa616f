"""A stdio MCP server that answers ``tools/call emit`` with exactly the bytes it is handed
(``arguments.b64``, ``@ID@`` replaced by the request's id; see tests/emitters.py), and everything
else correctly. Standard library only: ``python tests/stdio_emitter.py``."""

from __future__ import annotations

import base64
import json
import sys


def main() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            continue  # a notification, or an answer to a request of ours (we send none)
        method, request_id = message["method"], message["id"]
        if method == "tools/call":
            emitted = base64.b64decode(message["params"]["arguments"]["b64"])
            out.write(emitted.replace(b"@ID@", json.dumps(request_id).encode()))
        else:
            result: dict[str, object] = {}
            if method == "initialize":
                result = {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "stdio-emitter", "version": "1"},
                }
            elif method == "tools/list":
                result = {"tools": [{"name": "emit", "inputSchema": {"type": "object"}}]}
            out.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
