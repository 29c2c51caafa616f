#!/usr/bin/env bash
# Lint, render and validate the Helm chart, then run `mrtr-gateway check-config` on the
# gateway.yaml that each rendering puts in its ConfigMap, so a chart change cannot ship a config the
# gateway refuses, a manifest Kubernetes refuses, or an alert rule Prometheus refuses.
#
#   scripts/render-helm.sh [OUT_DIR]        (default: build/helm-render)
#
# Value sets: the chart defaults (plus stateKeys.existingSecret, the one value without a default),
# then every helm/mrtr-gateway/ci/*-values.yaml. Each rendering is validated with
# kubernetes-validate in strict mode (unknown fields refused) against $KUBE_VERSIONS; the
# Prometheus Operator's kinds have no schema there and get a structural check, the Gateway API's
# HTTPRoute (no CRD schema offline either) a field-by-field check of the v1 fields the chart uses,
# the Ingress and the HTTPRoute must lead to the Service's port, and every
# PrometheusRule's groups pass `promtool check rules`. Values that must be refused (no state keys,
# a typo caught by values.schema.json, keys or replica_id in `config`, an HTTPRoute attached to no
# Gateway) are checked too, each for its own reason.
#
# Tools: the `helm` CLI when it is on PATH (HELM=... to choose one); otherwise Helm's own Go SDK
# (v4) through the `helm-python-sdk` wheel from PyPI. Both helm-python-sdk and kubernetes-validate
# are installed once into a tools venv ($MRTR_TOOLS_VENV, default ~/.cache/mrtr-gateway/tools-venv).
# promtool comes from Debian's `prometheus` package, installed with apt-get when missing and
# running as root (as CI does). The gateway runs from $PYTHON (default .venv/bin/python).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART="$ROOT/helm/mrtr-gateway"
OUT="${1:-$ROOT/build/helm-render}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
HELM="${HELM:-$(command -v helm || true)}"
HELM_PYTHON_SDK="helm-python-sdk==0.2.2"
KUBERNETES_VALIDATE="kubernetes-validate==1.37.0"
KUBE_VERSIONS="${KUBE_VERSIONS:-1.29.0 1.32.0 1.35.0}"

TOOLS="${MRTR_TOOLS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mrtr-gateway/tools-venv}"
if ! "$TOOLS/bin/python" -c "import helm_python, yaml, kubernetes_validate" 2>/dev/null; then
  echo "render-helm: installing $HELM_PYTHON_SDK and $KUBERNETES_VALIDATE into $TOOLS" >&2
  [[ -x "$TOOLS/bin/python" ]] || python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install --quiet --disable-pip-version-check "$HELM_PYTHON_SDK" "$KUBERNETES_VALIDATE" "PyYAML>=6"
fi
DRIVER_PYTHON="$TOOLS/bin/python"

PROMTOOL="${PROMTOOL:-$(command -v promtool || true)}"
if [[ -z "$PROMTOOL" ]]; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    echo "render-helm: installing promtool (Debian package prometheus) with apt-get" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    PROMTOOL="$(command -v promtool)"
  else
    echo "render-helm: promtool not found; install Debian's prometheus package (or set PROMTOOL)" >&2
    exit 1
  fi
fi

rm -rf "$OUT"
mkdir -p "$OUT"
ALERT_TESTS="$ROOT/tests/helm/alerts.promtool.yaml"
export CHART OUT HELM PROMTOOL KUBE_VERSIONS ALERT_TESTS

"$DRIVER_PYTHON" - <<'PY'
"""Lint and render each value set; write every manifest and the ConfigMap's gateway.yaml to OUT."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

chart, out, helm_cli = Path(os.environ["CHART"]), Path(os.environ["OUT"]), os.environ["HELM"]
RELEASE, NAMESPACE = "ci", "mrtr"
KEYS = {"stateKeys": {"existingSecret": "ci-state-keys"}}  # the one value without a default
ROUTE = {"name": "r", "path": "/mcp", "backend": {"url": "http://127.0.0.1:8000/mcp"}}
REFUSED = {  # label: (values, a phrase the refusal must contain)
    "no-state-keys": ({}, "The chart never generates them"),
    "unknown-config-option": (
        {**KEYS, "config": {"routes": [{**ROUTE, "backend": {"url": "http://h", "tiemout": 3}}]}},
        "tiemout",
    ),
    "keys-in-configmap": ({**KEYS, "config": {"state": {"keys": ["k" * 40]}, "routes": [ROUTE]}}, "config.state.keys"),
    "keys-file-in-configmap": (
        {**KEYS, "config": {"state": {"keys_file": "/k"}, "routes": [ROUTE]}},
        "config.state.keys_file",
    ),
    "fixed-replica-id": ({**KEYS, "config": {"replica_id": "one", "routes": [ROUTE]}}, "config.replica_id"),
    "short-state-key": ({"stateKeys": {"keys": ["short"]}}, "stateKeys"),
    "grace-shorter-than-drain": (
        {**KEYS, "terminationGracePeriodSeconds": 30, "config": {"listen": {"drain_timeout": 30}, "routes": [ROUTE]}},
        "terminationGracePeriodSeconds (30) must be at least",
    ),
    "httproute-without-parent": ({**KEYS, "httpRoute": {"enabled": True}}, "httpRoute.parentRefs needs"),
}
SHUTDOWN_SECONDS = 10  # gateway.server.SHUTDOWN_TIMEOUT: the longest the shutdown after a drain takes
KINDS = {  # label: (kinds the rendering must hold, kinds it must not)
    "defaults": (
        {"NetworkPolicy", "PodDisruptionBudget"},
        {"Secret", "HorizontalPodAutoscaler", "PrometheusRule", "Ingress", "HTTPRoute"},
    ),
    "all-features-values": (
        {"HorizontalPodAutoscaler", "ServiceMonitor", "PrometheusRule", "ConfigMap", "Ingress", "HTTPRoute"},
        {"Secret"},
    ),
    "explicit-keys-values": ({"Secret", "HTTPRoute"}, {"Ingress"}),
    "single-replica-values": (set(), {"PodDisruptionBudget", "NetworkPolicy"}),
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


def validate(label: str, docs: list[dict]) -> list[str]:
    """Strict Kubernetes schemas for three versions; the operator's kinds structurally; promtool."""
    import kubernetes_validate

    problems = []
    for doc in docs:
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        if doc.get("apiVersion") == "monitoring.coreos.com/v1":
            if doc["kind"] not in ("ServiceMonitor", "PrometheusRule") or not doc.get("spec"):
                problems.append(f"{name}: not a ServiceMonitor or PrometheusRule with a spec")
            continue
        if doc.get("apiVersion") == "gateway.networking.k8s.io/v1":
            problems += [f"{name}: {p}" for p in http_route_problems(doc)]
            continue
        for version in os.environ["KUBE_VERSIONS"].split():
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                path = "/".join(map(str, exc.path))
                problems.append(f"{name}: Kubernetes {version}: {path}: {exc.message}")
            except kubernetes_validate.SchemaNotFoundError:
                problems.append(f"{name}: Kubernetes {version} has no schema for {doc['apiVersion']} {doc['kind']}")
    problems += grace_period(docs)
    problems += exposure(docs)
    for index, rule in enumerate(d for d in docs if d.get("kind") == "PrometheusRule"):
        rules_file = out / f"{label}-rules-{index}.yaml"
        rules_file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
        run = subprocess.run([os.environ["PROMTOOL"], "check", "rules", str(rules_file)], capture_output=True, text=True)
        if run.returncode:
            problems.append(f"promtool check rules: {run.stdout}{run.stderr}")
        if label == "all-features-values":  # the rendering tests/helm/alerts.promtool.yaml is written for
            problems += alert_unit_tests(rule["spec"]["groups"])
    return problems


def http_route_problems(doc: dict) -> list[str]:
    """The HTTPRoute against the Gateway API v1 fields and limits it may use (unknown fields refused)."""
    import re

    def unknown(where: str, node: object, allowed: set[str], required: tuple[str, ...] = ()) -> list[str]:
        if not isinstance(node, dict):
            return [f"{where}: not a mapping"]
        return [f"{where}: unknown field {k}" for k in sorted(set(node) - allowed)] + [
            f"{where}: missing {k}" for k in required if k not in node
        ]

    def items(where: str, node: object, low: int, high: int) -> tuple[list[str], list]:
        if not isinstance(node, list) or not low <= len(node) <= high:
            return [f"{where}: expected a list of {low} to {high} entries"], []
        return [], node

    if doc["kind"] != "HTTPRoute":
        return [f"not an HTTPRoute ({doc['kind']})"]
    problems = unknown("", doc, {"apiVersion", "kind", "metadata", "spec"}, ("metadata", "spec"))
    problems += unknown("metadata", doc["metadata"], {"name", "namespace", "labels", "annotations"}, ("name",))
    spec = doc["spec"]
    problems += unknown("spec", spec, {"parentRefs", "hostnames", "rules"}, ("parentRefs", "rules"))
    found, parents = items("spec.parentRefs", spec.get("parentRefs"), 1, 32)
    problems += found
    for i, ref in enumerate(parents):
        fields = {"group", "kind", "namespace", "name", "sectionName", "port"}
        problems += unknown(f"spec.parentRefs[{i}]", ref, fields, ("name",))
    found, hostnames = items("spec.hostnames", spec.get("hostnames", []), 0, 16)
    problems += found + [f"spec.hostnames: {h!r} is not a host name" for h in hostnames if not h or type(h) is not str]
    found, rules = items("spec.rules", spec.get("rules"), 1, 16)
    problems += found
    rule_fields = {"name", "matches", "filters", "backendRefs", "timeouts", "retry", "sessionPersistence"}
    for i, rule in enumerate(rules):
        problems += unknown(f"spec.rules[{i}]", rule, rule_fields, ("matches", "backendRefs"))
        found, matches = items(f"spec.rules[{i}].matches", rule.get("matches"), 1, 64)
        problems += found
        for j, match in enumerate(matches):
            where = f"spec.rules[{i}].matches[{j}]"
            problems += unknown(where, match, {"path", "headers", "queryParams", "method"}, ("path",))
            path = match.get("path") if isinstance(match.get("path"), dict) else {}
            problems += unknown(f"{where}.path", path, {"type", "value"}, ("type", "value"))
            if path.get("type") not in ("Exact", "PathPrefix", "RegularExpression"):
                problems.append(f"{where}.path.type: {path.get('type')!r}")
            if not str(path.get("value", "")).startswith("/"):
                problems.append(f"{where}.path.value: {path.get('value')!r} does not start with /")
        found, backends = items(f"spec.rules[{i}].backendRefs", rule.get("backendRefs"), 1, 16)
        problems += found
        for j, ref in enumerate(backends):
            fields = {"group", "kind", "name", "namespace", "port", "weight", "filters"}
            problems += unknown(f"spec.rules[{i}].backendRefs[{j}]", ref, fields, ("name", "port"))
        timeouts = rule.get("timeouts", {})
        problems += unknown(f"spec.rules[{i}].timeouts", timeouts, {"request", "backendRequest"})
        for key, value in timeouts.items():
            if not re.fullmatch(r"([0-9]{1,5}(h|m|s|ms)){1,4}", str(value)):
                problems.append(f"spec.rules[{i}].timeouts.{key}: {value!r} is not a Gateway API duration")
    return problems


def exposure(docs: list[dict]) -> list[str]:
    """Every Ingress path and HTTPRoute backend leads to the Service's client port, nowhere else."""
    (service,) = [d for d in docs if d["kind"] == "Service"]
    name = service["metadata"]["name"]
    (port,) = [p["port"] for p in service["spec"]["ports"] if p["name"] == "http"]
    targets = []
    for doc in docs:
        if doc["kind"] == "Ingress":
            for rule in doc["spec"]["rules"]:
                for path in rule["http"]["paths"]:
                    backend = path["backend"]["service"]
                    targets.append((f"Ingress {rule.get('host', '*')}{path['path']}", backend["name"], backend["port"]))
        if doc["kind"] == "HTTPRoute":
            for rule in doc["spec"]["rules"]:
                targets += [("HTTPRoute", ref["name"], {"number": ref["port"]}) for ref in rule["backendRefs"]]
    return [
        f"{where} leads to {to} port {to_port}, not the Service {name} port {port}"
        for where, to, to_port in targets
        if (to, to_port) != (name, {"number": port})
    ]


def grace_period(docs: list[dict]) -> list[str]:
    """The pod's grace period covers the preStop sleep, the drain and the shutdown (else the kubelet
    kills a pod that is still finishing held calls)."""
    import math

    configs = [d for d in docs if d["kind"] == "ConfigMap" and "gateway.yaml" in d.get("data", {})]
    drain = (yaml.safe_load(configs[0]["data"]["gateway.yaml"]).get("listen") or {}).get("drain_timeout", 20)
    problems = []
    for deployment in (d for d in docs if d["kind"] == "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        (container,) = [c for c in pod["containers"] if c["name"] == "gateway"]
        command = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        pre_stop = int(command[1]) if command[:1] == ["sleep"] else 0
        needed = pre_stop + math.ceil(drain) + SHUTDOWN_SECONDS
        if pod["terminationGracePeriodSeconds"] < needed:
            problems.append(
                f"terminationGracePeriodSeconds {pod['terminationGracePeriodSeconds']} < preStop {pre_stop} + "
                f"drain_timeout {drain} + shutdown {SHUTDOWN_SECONDS}"
            )
        else:
            print(
                f"render-helm: grace period {pod['terminationGracePeriodSeconds']} s >= preStop {pre_stop} + "
                f"drain_timeout {drain} + shutdown {SHUTDOWN_SECONDS}"
            )
    return problems


def alert_unit_tests(groups: list[dict]) -> list[str]:
    """`promtool test rules`: each alert fires on the series it is about, and only after `for`."""
    bare = [{**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]} for g in groups]
    (out / "alerts-under-test.yaml").write_text(yaml.safe_dump({"groups": bare}, sort_keys=False))
    tests = Path(os.environ["ALERT_TESTS"]).read_text().replace("[RULES]", "[alerts-under-test.yaml]")
    (out / "alerts.promtool.yaml").write_text(tests)
    run = subprocess.run(
        [os.environ["PROMTOOL"], "test", "rules", "alerts.promtool.yaml"], cwd=out, capture_output=True, text=True
    )
    print(f"render-helm: promtool test rules: {' '.join((run.stdout + run.stderr).split())}")
    return [f"promtool test rules:\n{run.stdout}{run.stderr}"] if run.returncode else []


failed = False
for values_file in [None, *sorted((chart / "ci").glob("*-values.yaml"))]:
    label = values_file.stem if values_file else "defaults"
    try:
        if values_file:
            docs = lint_and_render(values_file)
        else:
            docs = lint_and_render(None, KEYS)
    except RuntimeError as exc:
        print(f"render-helm: {label}: FAILED\n{exc}", file=sys.stderr)
        failed = True
        continue
    problems = validate(label, docs)
    present = {d["kind"] for d in docs}
    must, must_not = KINDS.get(label, (set(), set()))
    problems += [f"expected a {kind}" for kind in sorted(must - present)]
    problems += [f"expected no {kind}" for kind in sorted(must_not & present)]
    if problems:
        print(f"render-helm: {label}: INVALID\n  " + "\n  ".join(problems), file=sys.stderr)
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
    kinds = ", ".join(sorted({d["kind"] for d in docs}))
    print(f"render-helm: {label}: lint, render and strict validation for {os.environ['KUBE_VERSIONS']} OK ({kinds})")

for label, (values, phrase) in REFUSED.items():
    try:
        lint_and_render(None, values)
    except RuntimeError as exc:
        if phrase not in str(exc):
            print(f"render-helm: {label}: refused, but not for its reason ({phrase!r}):\n{exc}", file=sys.stderr)
            failed = True
            continue
        reason = " ".join(str(exc).split())
        print(f"render-helm: refused as it should be: {label}: {reason[-200:]}")
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
