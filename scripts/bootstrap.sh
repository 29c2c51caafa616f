#!/usr/bin/env bash
# Create (or repair) the two virtualenvs this project needs, and say what was done.
#
#   .venv         the gateway, editable, with its test extras (mcp==2.3.0 modern client + native server)
#   .venv-legacy  mcp==1.30.0 only: the handshake-era FastMCP peer the interop tests run as a subprocess
#   tests/interop/ts/node_modules
#                 the official TypeScript SDKs (client v2, server v1) for the TypeScript interop tests,
#                 installed with `npm ci` from the committed package-lock.json (needs node >= 20 and npm)
#
# The two SDK lines cannot share one environment. Each venv is checked with a real import and
# left alone when it already works, so running this again is cheap. node_modules is reinstalled
# only when the lock file changed since the last `npm ci` or a pinned package fails to import.
#
# Usage (from anywhere; it works in the repo root):  [PYTHON=python3.11] bash scripts/bootstrap.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo_root="$(pwd)"
python="${PYTHON:-python3}"
legacy_mcp_version="1.30.0"
modern_mcp_version="2.3.0"

say() { printf 'bootstrap: %s\n' "$*"; }

if ! command -v "$python" >/dev/null 2>&1; then
    say "interpreter '$python' not found; set PYTHON to a Python >= 3.11" >&2
    exit 1
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    say "$("$python" -V 2>&1) is too old; set PYTHON to a Python >= 3.11" >&2
    exit 1
fi

make_venv() {
    local dir="$1"
    if [[ -x "$dir/bin/python" ]]; then
        return
    fi
    say "creating $dir with $("$python" -V 2>&1)"
    if ! "$python" -m venv "$dir"; then
        say "'$python -m venv' failed; on Debian/Ubuntu install the python3.11-venv package" >&2
        exit 1
    fi
}

lock_digest() {
    "$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"
}

# The dependencies .venv was installed from: a change to pyproject.toml (a new dependency, a new pin)
# makes an existing .venv stale even when every import above still works.
venv_stamp=".venv/.mrtr-pyproject.sha256"

modern_ok() {
    [[ -f "$venv_stamp" && "$(cat "$venv_stamp")" == "$(lock_digest pyproject.toml)" ]] || return 1
    "$repo_root/.venv/bin/python" - "$repo_root" "$modern_mcp_version" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
from pathlib import Path

import aiohttp, pytest, pytest_aiohttp  # noqa: F401
import gateway
import mcp.client  # noqa: F401

repo, wanted = Path(sys.argv[1]).resolve(), sys.argv[2]
assert version("mcp") == wanted, version("mcp")
assert Path(gateway.__file__).resolve().is_relative_to(repo), gateway.__file__
PY
    [[ -x "$repo_root/.venv/bin/ruff" && -x "$repo_root/.venv/bin/mypy" ]]
}

legacy_ok() {
    "$repo_root/.venv-legacy/bin/python" - "$legacy_mcp_version" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version

import mcp.server.fastmcp  # noqa: F401

assert version("mcp") == sys.argv[1], version("mcp")
PY
}

if [[ -x .venv/bin/python ]] && modern_ok; then
    say ".venv is complete (mcp==$modern_mcp_version, gateway installed editable): nothing to do"
else
    make_venv .venv
    say "installing the gateway editable with test extras into .venv"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
    lock_digest pyproject.toml >"$venv_stamp"
    modern_ok || { rm -f "$venv_stamp"; say ".venv still fails its import check after install" >&2; exit 1; }
    say ".venv ready"
fi

if [[ -x .venv-legacy/bin/python ]] && legacy_ok; then
    say ".venv-legacy is complete (mcp==$legacy_mcp_version): nothing to do"
else
    make_venv .venv-legacy
    say "installing mcp==$legacy_mcp_version into .venv-legacy"
    .venv-legacy/bin/python -m pip install --quiet --disable-pip-version-check "mcp==$legacy_mcp_version"
    legacy_ok || { say ".venv-legacy still fails its import check after install" >&2; exit 1; }
    say ".venv-legacy ready"
fi

ts_dir="tests/interop/ts"
ts_stamp="$ts_dir/node_modules/.mrtr-package-lock.sha256"


node_ok() {
    [[ -f "$ts_stamp" && "$(cat "$ts_stamp")" == "$(lock_digest "$ts_dir/package-lock.json")" ]] || return 1
    # Every pinned dependency installed at its exact version, and both SDKs import.
    (cd "$ts_dir" && node --input-type=module - <<'JS' >/dev/null 2>&1)
import { readFileSync } from 'node:fs';
const { dependencies } = JSON.parse(readFileSync('package.json', 'utf8'));
for (const [name, wanted] of Object.entries(dependencies)) {
    const { version } = JSON.parse(readFileSync(`node_modules/${name}/package.json`, 'utf8'));
    if (version !== wanted) throw new Error(`${name} ${version} != ${wanted}`);
}
await import('@modelcontextprotocol/client');
await import('@modelcontextprotocol/sdk/server/mcp.js');
JS
}

for tool in node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        say "'$tool' not found; the TypeScript interop tests need Node.js >= 20 with npm (https://nodejs.org)" >&2
        exit 1
    fi
done
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
    say "node $(node --version) is too old; the TypeScript SDKs need Node.js >= 20" >&2
    exit 1
fi

if node_ok; then
    say "$ts_dir/node_modules is complete (matches package-lock.json): nothing to do"
else
    say "installing the TypeScript SDKs into $ts_dir/node_modules (npm ci)"
    rm -f "$ts_stamp"
    (cd "$ts_dir" && npm ci --no-audit --no-fund)
    lock_digest "$ts_dir/package-lock.json" >"$ts_stamp"
    node_ok || { rm -f "$ts_stamp"; say "$ts_dir/node_modules still fails its import check after npm ci" >&2; exit 1; }
    say "$ts_dir/node_modules ready"
fi

say "done; run the tests with: .venv/bin/pytest"
