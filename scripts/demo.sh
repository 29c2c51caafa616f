#!/usr/bin/env bash
# Run the demo from a fresh clone: installs the gateway (and the SDK its printed client example
# uses) into .venv if needed, then starts the bundled legacy demo server and the gateway in front
# of it on 127.0.0.1.
# Usage: bash scripts/demo.sh [--port N] [--walk [TOOL]]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! .venv/bin/python -c "import gateway, aiohttp, mcp" >/dev/null 2>&1; then
  echo "setting up .venv (first run only)…" >&2
  "$PYTHON" -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -e ".[demo]"
fi
exec .venv/bin/mrtr-gateway demo "$@"
