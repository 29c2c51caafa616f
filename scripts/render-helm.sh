#!/usr/bin/env bash
# Lint and render the Helm chart, then run `mrtr-gateway check-config` on the gateway.yaml that
# each rendering puts in its ConfigMap, so a chart change cannot ship a config the gateway refuses.
#
#   scripts/render-helm.sh [OUT_DIR]        (default: build/helm-render)
#
# Value sets: the chart defaults, then every helm/mrtr-gateway/ci/*-values.yaml. Values that must
# be refused (a typo caught by values.schema.json, keys or replica_id in `config`) are checked too.
#
# Helm: the `helm` CLI when it is on PATH (HELM=... to choose one); otherwise Helm's own Go SDK
# (v4) through the `helm-python-sdk` wheel from PyPI, installed once into a tools venv
# ($MRTR_TOOLS_VENV, default ~/.cache/mrtr-gateway/tools-venv). The gateway runs from $PYTHON
# (default .venv/bin/python).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART="$ROOT/helm/mrtr-gateway"
OUT="${1:-$ROOT/build/helm-render}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
HELM="${HELM:-$(command -v helm || true)}"
HELM_PYTHON_SDK="helm-python-sdk==0.2.2"

if [[ -n "$HELM" ]]; then
  DRIVER_PYTHON="$PYTHON"
else
  TOOLS="${MRTR_TOOLS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mrtr-gateway/tools-venv}"
  if ! "$TOOLS/bin/python" -c "import helm_python, yaml" 2>/dev/null; then
    echo "render-helm: no helm CLI; installing $HELM_PYTHON_SDK into $TOOLS" >&2
    python3 -m venv "$TOOLS"
    "$TOOLS/bin/pip" install --quiet --disable-pip-version-check "$HELM_PYTHON_SDK" "PyYAML>=6"
  fi
  DRIVER_PYTHON="$TOOLS/bin/python"
fi

rm -rf "$OUT"
mkdir -p "$OUT"
export CHART OUT HELM

"$DRIVER_PYTHON" - <<'PY'
"""Lint and render each value set; write every manifest and the ConfigMap's gateway.yaml to OUT."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

chart, out, helm_cli = Path(os.environ["CHART"]), Path(os.environ["OUT"]), os.environ["HELM"]
RELEASE, NAMESPACE = "ci", "mrtr"
ROUTE = {"name": "r", "path": "/mcp", "backend": {"url": "http://127.0.0.1:8000/mcp"}}
REFUSED = {
    "unknown-config-option": {"config": {"routes": [{**ROUTE, "backend": {"url": "http://h", "tiemout": 3}}]}},
    "keys-in-configmap": {"config": {"state": {"keys": ["k" * 40]}, "routes": [ROUTE]}},
    "fixed-replica-id": {"config": {"replica_id": "one", "routes": [ROUTE]}},
    "short-state-key": {"stateKeys": {"keys": ["short"]}},
}


def lint_and_render(values_file: Path | None, values: dict | None = None) -> list[dict]:
    """Return the rendered documents; raise RuntimeError with Helm's message on any finding."""
    if helm_cli:
        args = ["--values", str(values_file)] if values_file else []
        if values is not None:
            tmp = out / "refused-values.yaml"
            tmp.write_text(yaml.safe_dump(values))
            args = ["--values", str(tmp)]
        for cmd in (
            [helm_cli, "lint", "--strict", str(chart), *args],
            [helm_cli, "template", RELEASE, str(chart), "--namespace", NAMESPACE, *args],
        ):
            run = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if run.returncode:
                raise RuntimeError(run.stderr or run.stdout)
        return [d for d in yaml.safe_load_all(run.stdout) if d]
    import helm_python as helm

    helm.disable_logging()
    if values is None:
        values = yaml.safe_load(values_file.read_text()) if values_file else {}
    report = helm.lint(str(chart), values, strict=True, namespace=NAMESPACE)
    problems = [m["error"] for m in report["messages"] if m["severity"] > 1] + report["errors"]
    if problems:
        raise RuntimeError("\n".join(problems))
    with helm.Chart.load(str(chart)) as loaded:
        try:
            merged = loaded.merge_values(values)
            loaded.validate_schema(merged)
            rendered = loaded.render(merged, name=RELEASE, namespace=NAMESPACE, is_install=True)
        except helm.HelmError as exc:
            raise RuntimeError(str(exc)) from exc
    docs = []
    for path, text in sorted(rendered.items()):
        if path.endswith(".yaml"):
            docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


failed = False
for values_file in [None, *sorted((chart / "ci").glob("*-values.yaml"))]:
    label = values_file.stem if values_file else "defaults"
    try:
        docs = lint_and_render(values_file)
    except RuntimeError as exc:
        print(f"render-helm: {label}: FAILED\n{exc}", file=sys.stderr)
        failed = True
        continue
    target = out / label
    target.mkdir()
    (target / "manifests.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    configmaps = [d for d in docs if d["kind"] == "ConfigMap" and "gateway.yaml" in d.get("data", {})]
    if len(configmaps) != 1:
        print(f"render-helm: {label}: expected one ConfigMap with gateway.yaml, got {len(configmaps)}", file=sys.stderr)
        failed = True
        continue
    (target / "gateway.yaml").write_text(configmaps[0]["data"]["gateway.yaml"])
    print(f"render-helm: {label}: lint and render OK ({', '.join(sorted({d['kind'] for d in docs}))})")

for label, values in REFUSED.items():
    try:
        lint_and_render(None, values)
    except RuntimeError as exc:
        reason = str(exc).strip().splitlines()[-1].strip()
        print(f"render-helm: refused as it should be: {label}: {reason}")
    else:
        print(f"render-helm: {label}: rendered, but the chart should refuse it", file=sys.stderr)
        failed = True

sys.exit(1 if failed else 0)
PY

status=0
for config in "$OUT"/*/gateway.yaml; do
  # A placeholder key: the real ones come from the Secret at run time.
  if ! MRTR_GATEWAY_STATE_KEYS="render-helm-placeholder-key-000000000000" \
      "$PYTHON" -m gateway check-config "$config"; then
    status=1
  fi
done
exit "$status"
