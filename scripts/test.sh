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
echo "== helm chart lint + render"
bash scripts/render-helm.sh
echo "== pytest"
.venv/bin/pytest -p no:cacheprovider "$@"
