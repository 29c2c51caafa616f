#!/usr/bin/env bash
# The whole benchmark from a fresh clone: both virtualenvs (scripts/bootstrap.sh), the bench-only
# extra (matplotlib, for the chart), then one run writing bench/results/latest.{json,png}.
#
#   bash bench/run.sh [--quick] [--json PATH] [--gateway-src DIR] [--label NAME]
#
# Throughput uses `wrk` when it is installed (Debian: apt-get install wrk), else the bench's own
# aiohttp load generator; the report says which.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh >/dev/null
if ! .venv/bin/python -c 'import matplotlib' 2>/dev/null || ! [[ -x .venv/bin/py-spy ]]; then
    echo "bench: installing the bench extra (matplotlib, py-spy) into .venv"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[bench]'
fi
ulimit -n "$(ulimit -Hn)"   # 10,000 held calls need ~10,000 descriptors in the gateway and the backend
exec .venv/bin/python -m bench "$@"
