#!/usr/bin/env bash
# Regenerate constraints.txt: the exact versions of the gateway's runtime dependencies (with the
# tracing and uvloop extras the image installs), the image's init (dumb-init) and the build backend, as pip
# resolves them today for Python 3.11.
# The Dockerfile installs with --constraint constraints.txt, so two builds of the same commit
# get the same versions. Run it when pyproject.toml's dependencies change, review the diff.
#
# Versions, not hashes: one `--hash` in a constraints file puts pip in --require-hashes mode for
# every requirement of the install, and the image installs the project itself from the build
# context (a directory, which pip cannot hash). Hash-checking would take a second, hashed
# requirements file for the dependencies and a --no-deps install of the project; until then the
# image's inputs are the base image by digest and these exact versions from PyPI over TLS.
#
#   bash scripts/lock-runtime.sh          (PYTHON=python3.11 to choose the interpreter)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check --upgrade "setuptools>=69" wheel
"$work/venv/bin/pip" install --quiet --disable-pip-version-check '.[tracing,uvloop]' dumb-init
{
    echo "# Exact versions for the container image (pip --constraint); regenerate with scripts/lock-runtime.sh."
    echo "# Runtime dependencies of mrtr-gateway with its tracing and uvloop extras, dumb-init (the image's PID 1) and the build backend."
    "$work/venv/bin/pip" freeze --all --disable-pip-version-check --exclude mrtr-gateway --exclude pip
} >constraints.txt
echo "lock-runtime: wrote constraints.txt ($(grep -c '==' constraints.txt) pins)"
