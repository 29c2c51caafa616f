#!/usr/bin/env bash
# Lint, render and validate the Helm chart, then run `mrtr-gateway check-config` on the
# gateway.yaml that each rendering puts in its ConfigMap, so a chart change cannot ship a config the
# gateway refuses, a manifest Kubernetes refuses, or an alert rule Prometheus refuses.
#
#   scripts/render-helm.sh [OUT_DIR]        (default: build/helm-render)
#
# Value sets: the chart defaults (plus stateKeys.existingSecret, the one value without a default),
# then every helm/mrtr-gateway/ci/*-values.yaml. The chart creates its kinds from CRDs (ServiceMonitor
# and PrometheusRule, monitoring.coreos.com/v1; HTTPRoute, gateway.networking.k8s.io/v1) only where
# the cluster serves them (_helpers.tpl, mrtr-gateway.served), so every rendering that expects them
# passes them as `--api-versions monitoring.coreos.com/v1/ServiceMonitor` etc. (CRD_KINDS below), as
# a cluster with those CRDs lists them. Each value set is rendered twice:
# - for the newest Kubernetes of $KUBE_VERSIONS and validated with kubernetes-validate in strict mode
#   (unknown fields refused) against each of $KUBE_VERSIONS;
# - for the oldest Kubernetes the chart claims (Chart.yaml kubeVersion; $OLDEST_KUBE), with the API
#   versions a cluster of that version serves (`helm lint --kube-version`, `helm template
#   --kube-version --api-versions`) and CRD_KINDS (the templates' output, not a claim that the Gateway
#   API's v1 CRDs install on 1.20: they need 1.23), and validated in strict mode against its schema.
#   The pinned kubernetes-validate ships 1.25 and newer only, and 1.25 has no policy/v1beta1 any
#   more, so the 1.20 schema comes from kubernetes-validate 1.28.3, the last release that ships it
#   (its schema files only, installed beside the tools). The two renderings must differ in the
#   apiVersion of the PodDisruptionBudget (policy/v1beta1 on 1.20) and the HorizontalPodAutoscaler
#   (autoscaling/v2beta2) only, the newest using policy/v1 and autoscaling/v2.
# Then the all-features values are rendered for every Kubernetes minor from 1.20 to 1.26, with the
# API versions its discovery lists and with --kube-version alone, and each PodDisruptionBudget and
# HorizontalPodAutoscaler must have the version that minor serves and pass its strict schema.
# The Prometheus Operator's kinds have no schema there and get a structural check, the Gateway API's
# HTTPRoute (no CRD schema offline either) a field-by-field check of the v1 fields the chart uses,
# the Ingress and the HTTPRoute must lead to the Service's port, and every
# PrometheusRule's groups pass `promtool check rules`. Then the all-features values are rendered as
# a $OLDEST_KUBE cluster without those CRDs sees them (its built-in API versions only, as a bare API
# server, or `helm template` without --api-versions for them), and as one with the Prometheus
# Operator's CRDs only: no ServiceMonitor, PrometheusRule or HTTPRoute the cluster does not serve,
# every other document as rendered with them (and valid in the $OLDEST_KUBE strict schema), and
# NOTES.txt (rendered through the SDK, which `helm template` does not print) saying plainly which
# kinds were not created and how to get them, claiming none of them, otherwise unchanged. Values
# that must be refused (no state keys, a typo caught by values.schema.json, keys or replica_id in
# `config`, an HTTPRoute attached to no Gateway, whether the cluster serves HTTPRoute or not) are
# checked too, each for its own reason, and so is a Kubernetes older than kubeVersion.
#
# Tools: the `helm` CLI when it is on PATH (HELM=... to choose one); otherwise Helm's own Go SDK
# (v4) through the `helm-python-sdk` wheel from PyPI; NOTES.txt always through the SDK. Both
# helm-python-sdk and kubernetes-validate are installed once into a tools venv ($MRTR_TOOLS_VENV,
# default ~/.cache/mrtr-gateway/tools-venv), and the older kubernetes-validate's schemas into a
# folder of it (pip install --target).
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
# The oldest Kubernetes the chart claims (Chart.yaml kubeVersion), the version a real cluster reported.
OLDEST_KUBE="1.20.2"
# The last kubernetes-validate that ships the 1.20 schema (1.29.1 starts at 1.22, 1.37.0 at 1.25).
KUBERNETES_VALIDATE_OLD="kubernetes-validate==1.28.3"

TOOLS="${MRTR_TOOLS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mrtr-gateway/tools-venv}"
if ! "$TOOLS/bin/python" -c "import helm_python, yaml, kubernetes_validate" 2>/dev/null; then
  echo "render-helm: installing $HELM_PYTHON_SDK and $KUBERNETES_VALIDATE into $TOOLS" >&2
  [[ -x "$TOOLS/bin/python" ]] || python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install --quiet --disable-pip-version-check "$HELM_PYTHON_SDK" "$KUBERNETES_VALIDATE" "PyYAML>=6"
fi
OLD_SCHEMAS="$TOOLS/${KUBERNETES_VALIDATE_OLD/==/-}/kubernetes_validate/kubernetes-json-schema"
if [[ ! -d "$OLD_SCHEMAS/v${OLDEST_KUBE%.*}.0-local-strict" ]]; then
  echo "render-helm: installing the schemas of $KUBERNETES_VALIDATE_OLD into $TOOLS" >&2
  "$TOOLS/bin/pip" install --quiet --disable-pip-version-check --no-deps \
    --target "$TOOLS/${KUBERNETES_VALIDATE_OLD/==/-}" "$KUBERNETES_VALIDATE_OLD"
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
export CHART OUT HELM PROMTOOL KUBE_VERSIONS OLDEST_KUBE OLD_SCHEMAS ALERT_TESTS

"$DRIVER_PYTHON" - <<'PY'
"""Lint and render each value set; write every manifest and the ConfigMap's gateway.yaml to OUT."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

chart, out, helm_cli = Path(os.environ["CHART"]), Path(os.environ["OUT"]), os.environ["HELM"]
RELEASE, NAMESPACE = "ci", "mrtr"
# libyaml's loader and dumper when PyYAML has them: the renderings are large (the dashboard, the rules).
LOADER, DUMPER = getattr(yaml, "CSafeLoader", yaml.SafeLoader), getattr(yaml, "CSafeDumper", yaml.SafeDumper)
KEYS = {"stateKeys": {"existingSecret": "ci-state-keys"}}  # the one value without a default
ROUTE = {"name": "r", "path": "/mcp", "backend": {"url": "http://127.0.0.1:8000/mcp"}}
# The kinds from CRDs the chart creates only where the cluster serves them (_helpers.tpl,
# mrtr-gateway.served), as group/version/Kind: what a cluster with the Prometheus Operator's and the
# Gateway API's CRDs lists, and what `helm template --api-versions` must be given to render them.
CRD_KINDS = [
    "monitoring.coreos.com/v1/ServiceMonitor",
    "monitoring.coreos.com/v1/PrometheusRule",
    "gateway.networking.k8s.io/v1/HTTPRoute",
]
PROMETHEUS_OPERATOR_KINDS = [k for k in CRD_KINDS if k.startswith("monitoring.coreos.com/")]
REFUSED = {  # label: (values, a phrase the refusal must contain[, lint_and_render's keyword arguments])
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
    # Refused whether the cluster serves HTTPRoute or not (the route is left out where it does not).
    "httproute-without-parent": (
        {**KEYS, "httpRoute": {"enabled": True}},
        "httpRoute.parentRefs needs",
        {"api_versions": CRD_KINDS},
    ),
    "httproute-without-parent-nor-crd": ({**KEYS, "httpRoute": {"enabled": True}}, "httpRoute.parentRefs needs"),
    # Older than Chart.yaml's kubeVersion.
    "kubernetes-1.19": (KEYS, "requires kubeVersion", {"kube_version": "1.19.16"}),
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


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.lstrip("v").split("-")[0].split("."))


NEWEST = max(os.environ["KUBE_VERSIONS"].split(), key=version_tuple)
OLDEST = os.environ["OLDEST_KUBE"]
PDB, HPA = "PodDisruptionBudget", "HorizontalPodAutoscaler"
# What a cluster's discovery lists, as group/version/kind, for the kinds whose apiVersion the chart picks
# (_helpers.tpl, mrtr-gateway.apiVersion): (group/version, kind, first minor served, last minor served).
SERVED = [
    ("policy/v1", PDB, 21, None),
    ("policy/v1beta1", PDB, 0, 24),
    ("autoscaling/v1", HPA, 0, None),
    ("autoscaling/v2", HPA, 23, None),
    ("autoscaling/v2beta1", HPA, 0, 24),
    ("autoscaling/v2beta2", HPA, 0, 25),
]
MATRIX_MINORS = range(20, 27)  # 1.20 to 1.26: each change above (1.21, 1.23, 1.25, 1.26) and the minors between


def served(version: str) -> list[str]:
    """The --api-versions a cluster of this version would give Helm for those kinds."""
    minor = version_tuple(version)[1]
    return [f"{gv}/{kind}" for gv, kind, first, last in SERVED if first <= minor <= (last or minor)]


def expected_api_versions(version: str) -> dict[str, str]:
    """The stable version where this Kubernetes serves it, else the beta one 1.20 serves."""
    minor = version_tuple(version)[1]
    return {
        PDB: "policy/v1" if minor >= 21 else "policy/v1beta1",
        HPA: "autoscaling/v2" if minor >= 23 else "autoscaling/v2beta2",
    }


def kube_version_allowed(constraint: str, version: str) -> bool:
    """Chart.yaml's kubeVersion against a Kubernetes version, as `helm template --kube-version` checks
    it (the SDK's render does not): comparisons joined by commas or spaces, alternatives by ||."""
    import operator
    import re

    ops = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "=": operator.eq}
    ops["!="] = operator.ne
    have = version_tuple(version)[:3]
    for alternative in constraint.split("||"):
        terms = re.findall(r"(>=|<=|!=|>|<|=)?\s*v?(\d+(?:\.\d+){0,2})(?:-[0-9A-Za-z.-]+)?", alternative)
        if not terms or re.sub(r"(>=|<=|!=|>|<|=)?\s*v?\d+(\.\d+){0,2}(-[0-9A-Za-z.-]+)?|[\s,]", "", alternative):
            raise RuntimeError(f"render-helm: cannot read kubeVersion {constraint!r}; extend kube_version_allowed")
        want = [(ops[op or "="], (*version_tuple(v), 0, 0)[:3]) for op, v in terms]
        if all(compare(have, bound) for compare, bound in want):
            return True
    return False


def lint_and_render(
    values_file: Path | None,
    values: dict | None = None,
    kube_version: str = NEWEST,
    api_versions: list[str] | None = None,
    lint: bool = True,
    show_only: tuple[str, ...] = (),
) -> list[dict]:
    """Return the rendered documents for that Kubernetes version and the API versions its cluster lists
    (None: Helm's own list, as `helm template` without a cluster), of the templates in show_only or of
    all; raise RuntimeError with Helm's message on any finding. The lint of the newest keeps Helm's
    default Kubernetes version."""
    api_versions = api_versions or []
    lint_kube = [] if kube_version == NEWEST else ["--kube-version", kube_version]
    if helm_cli:
        args = ["--values", str(values_file)] if values_file else []
        if values is not None:
            tmp = out / "refused-values.yaml"
            tmp.write_text(yaml.safe_dump(values))
            args = ["--values", str(tmp)]
        template = [helm_cli, "template", RELEASE, str(chart), "--namespace", NAMESPACE, *args]
        template += ["--kube-version", kube_version] + [f"--api-versions={a}" for a in api_versions]
        template += [f"--show-only=templates/{name}" for name in show_only]
        for cmd in ([[helm_cli, "lint", "--strict", str(chart), *lint_kube, *args]] if lint else []) + [template]:
            run = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if run.returncode:
                raise RuntimeError(run.stderr or run.stdout)
        return [d for d in yaml.load_all(run.stdout, Loader=LOADER) if d]
    import helm_python as helm

    helm.disable_logging()
    if values is None:
        values = yaml.load(values_file.read_text(), Loader=LOADER) if values_file else {}
    if lint:
        lint_version = None if kube_version == NEWEST else f"v{kube_version}"
        report = helm.lint(str(chart), values, strict=True, namespace=NAMESPACE, kube_version=lint_version)
        problems = [m["error"] for m in report["messages"] if m["severity"] > 1] + report["errors"]
        if problems:
            raise RuntimeError("\n".join(problems))
    rendered = sdk_render(values, kube_version, api_versions)
    docs = []
    for path, text in sorted(rendered.items()):
        if path.endswith(".yaml") and (not show_only or path.rpartition("/templates/")[2] in show_only):
            docs += [d for d in yaml.load_all(text, Loader=LOADER) if d]
    return docs


def sdk_render(values: dict, kube_version: str, api_versions: list[str]) -> dict[str, str]:
    """Every rendered file of the chart, NOTES.txt included, by path, through Helm's Go SDK as
    `helm template --kube-version --api-versions` renders them; RuntimeError with Helm's message."""
    import json

    import helm_python as helm
    from helm_python import _native

    helm.disable_logging()
    with helm.Chart.load(str(chart)) as loaded:
        constraint = loaded.metadata.get("kubeVersion")
        if constraint and not kube_version_allowed(constraint, kube_version):
            raise RuntimeError(
                f"chart requires kubeVersion: {constraint} which is incompatible with Kubernetes v{kube_version}"
            )
        try:
            merged = loaded.merge_values(values)
            loaded.validate_schema(merged)
            # Chart.render() has no kube_version or api_versions (helm-python-sdk 0.2.2); libhelm_c's
            # helm_render takes them, as `helm template --kube-version --api-versions` does (the
            # api_versions are added to Helm's built-in list).
            opts = {"name": RELEASE, "namespace": NAMESPACE, "is_install": True, "kube_version": f"v{kube_version}"}
            return json.loads(
                _native.call_string(
                    "helm_render", loaded._raw(), json.dumps(merged), json.dumps({**opts, "api_versions": api_versions})
                )
            )
        except helm.HelmError as exc:
            raise RuntimeError(str(exc)) from exc


def render_notes(values_file: Path, kube_version: str, api_versions: list[str]) -> str:
    """The install notes (NOTES.txt) for those values, Kubernetes version and API versions. Always
    through the SDK: `helm template` does not print them."""
    values = yaml.load(values_file.read_text(), Loader=LOADER)
    rendered = sdk_render(values, kube_version, api_versions)
    (notes,) = [text for path, text in rendered.items() if path.endswith("/templates/NOTES.txt")]
    return notes


_OLD_VALIDATORS: dict = {}


def schema_problems(doc: dict, version: str) -> list[str]:
    """The document against Kubernetes `version`'s strict schema (unknown fields refused): from the
    pinned kubernetes-validate where it ships that version, else from kubernetes-validate 1.28.3's
    schema files (OLD_SCHEMAS), resolved the way that release resolves them."""
    import json
    import re

    import jsonschema
    import kubernetes_validate
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
    minor = ".".join(version.split(".")[:2])
    shipped = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{minor}.0-local-strict"
    if shipped.is_dir():
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            return [f"{name}: Kubernetes {version}: {'/'.join(map(str, exc.path))}: {exc.message}"]
        except kubernetes_validate.SchemaNotFoundError:
            return [f"{name}: Kubernetes {version} has no schema for {doc['apiVersion']} {doc['kind']}"]
        return []
    folder = Path(os.environ["OLD_SCHEMAS"]) / f"v{minor}.0-local-strict"
    if not folder.is_dir():
        return [f"{name}: no strict schema for Kubernetes {minor} in either kubernetes-validate"]
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", doc["apiVersion"])
    schema_file = folder / f"{doc['kind'].lower()}-{group_version}.json"
    if not schema_file.is_file():
        return [f"{name}: Kubernetes {version} has no schema for {doc['apiVersion']} {doc['kind']}"]
    if schema_file not in _OLD_VALIDATORS:
        registry = _OLD_VALIDATORS.get(folder)
        if registry is None:  # the schemas refer to _definitions.json beside them
            definitions = json.loads((folder / "_definitions.json").read_text())
            registry = Registry().with_resource(
                (folder / "_definitions.json").as_uri(), Resource(definitions, specification=DRAFT202012)
            )
            _OLD_VALIDATORS[folder] = registry
        schema = json.loads(schema_file.read_text())
        registry = registry.with_resource(schema_file.as_uri(), Resource(schema, specification=DRAFT202012))
        validator = jsonschema.Draft202012Validator({"$ref": schema_file.as_uri()}, registry=registry)
        _OLD_VALIDATORS[schema_file] = validator
    return [
        f"{name}: Kubernetes {version}: {'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in _OLD_VALIDATORS[schema_file].iter_errors(doc)
    ]


def validate(label: str, docs: list[dict], versions: list[str]) -> list[str]:
    """Strict Kubernetes schemas for those versions; the operator's kinds structurally; promtool."""
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
        for version in versions:
            problems += schema_problems(doc, version)
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


def builtin(doc: dict) -> bool:
    """A kind of Kubernetes itself (the CRDs' kinds get their own checks in validate())."""
    return doc.get("apiVersion") not in ("monitoring.coreos.com/v1", "gateway.networking.k8s.io/v1")


def oldest_problems(newest: list[dict], oldest: list[dict]) -> list[str]:
    """The rendering for the oldest Kubernetes differs from the newest's in the apiVersion of the
    PodDisruptionBudget and the HorizontalPodAutoscaler only, each the one its version serves (so the
    newest's checks, promtool and check-config hold for it too), and passes that version's schemas."""
    problems = []
    for version, docs in ((NEWEST, newest), (OLDEST, oldest)):
        want = expected_api_versions(version)
        problems += [
            f"Kubernetes {version}: {d['kind']} is {d['apiVersion']}, not {want[d['kind']]}"
            for d in docs
            if d["kind"] in want and d["apiVersion"] != want[d["kind"]]
        ]

    def by_name(docs: list[dict]) -> dict:
        """Each document by kind and name, without the apiVersion the Kubernetes version picks."""
        picked = (PDB, HPA)
        return {
            (d["kind"], d["metadata"]["name"]): {
                k: v for k, v in d.items() if k != "apiVersion" or d["kind"] not in picked
            }
            for d in docs
        }

    newest_docs, oldest_docs = by_name(newest), by_name(oldest)
    problems += [
        f"{kind}/{name} differs between the renderings for Kubernetes {NEWEST} and {OLDEST}"
        for kind, name in sorted(newest_docs.keys() | oldest_docs.keys())
        if newest_docs.get((kind, name)) != oldest_docs.get((kind, name))
    ]
    return problems + [p for d in oldest if builtin(d) for p in schema_problems(d, OLDEST)]


def version_matrix() -> list[str]:
    """The all-features rendering for every minor from 1.20 on, from a cluster's discovery and from
    --kube-version alone: its PodDisruptionBudget and HorizontalPodAutoscaler in the version the
    minor serves, and valid in that minor's strict schema."""
    problems = []
    for minor in MATRIX_MINORS:
        version = f"1.{minor}.0"
        for api_versions, how in ((served(version), "discovery"), ([], "--kube-version alone")):
            try:
                docs = lint_and_render(
                    chart / "ci" / "all-features-values.yaml",
                    None,
                    version,
                    api_versions,
                    lint=False,
                    show_only=("poddisruptionbudget.yaml", "hpa.yaml"),
                )
            except RuntimeError as exc:
                problems.append(f"Kubernetes {version} ({how}): {exc}")
                continue
            got = {d["kind"]: d["apiVersion"] for d in docs if d["kind"] in (PDB, HPA)}
            if got != expected_api_versions(version):
                problems.append(f"Kubernetes {version} ({how}): {got}, not {expected_api_versions(version)}")
            problems += [p for d in docs if d["kind"] in (PDB, HPA) for p in schema_problems(d, version)]
    return problems


# What NOTES.txt says of each kind from a CRD: a line claiming the object when it was created, and a
# "not created" line (with its two continuation lines) naming the group/version, kind and the
# --api-versions that helm template needs when the kind is enabled but the cluster does not serve it.
NOTES_CLAIMS = {
    "ServiceMonitor": r"^Metrics: .* \(scraped through the ServiceMonitor\)$",
    "PrometheusRule": r"^Alerts: +PrometheusRule \S+$",
    "HTTPRoute": r"^From outside: +HTTPRoute \S+ on Gateway ",
}


def notes_problems(notes: str, served_kinds: list[str]) -> list[str]:
    """NOTES.txt of the all-features values (every CRD kind enabled) for a cluster serving served_kinds:
    the claim of each kind served, the "not created" line of each one not, and nothing else of either."""
    import re

    problems = [f"NOTES.txt: {line!r} is not rendered" for line in notes.splitlines() if "<no value>" in line]
    for api in CRD_KINDS:
        group_version, kind = api.rsplit("/", 1)
        claim = re.search(NOTES_CLAIMS[kind], notes, flags=re.MULTILINE)
        missing = re.search(
            rf"^{kind}: +not created, this cluster does not serve {re.escape(group_version)} {kind}\n"
            rf" {{20}}\(.*\n {{20}}.*--api-versions {re.escape(api)}\)$",
            notes,
            flags=re.MULTILINE,
        )
        mentioned = re.search(rf"^{kind}: ", notes, flags=re.MULTILINE)
        if api in served_kinds and (not claim or mentioned):
            problems.append(f"NOTES.txt: {kind} is served and created, but the notes do not say so or say otherwise")
        if api not in served_kinds and (claim or not missing):
            problems.append(f"NOTES.txt: {kind} is not served, but the notes claim it or do not say it was not created")
    return problems


def notes_without_crd_lines(notes: str) -> list[str]:
    """NOTES.txt without the lines (and the part of the Metrics line) that depend on the CRD kinds."""
    import re

    kept, in_missing = [], False
    for line in notes.splitlines():
        if re.match(r"(ServiceMonitor|PrometheusRule|HTTPRoute): +not created", line):
            in_missing = True
            continue
        if in_missing and line.startswith(" " * 20):
            continue
        in_missing = False
        if not re.match(r"(From outside: +HTTPRoute|Alerts: +PrometheusRule) ", line):
            kept.append(line.replace(" (scraped through the ServiceMonitor)", ""))
    return kept


def crd_kinds_not_served(with_crds: list[dict]) -> list[str]:
    """The all-features values for Kubernetes OLDEST as a cluster that serves none of CRD_KINDS sees
    them (its built-in API versions only), then as one with the Prometheus Operator's CRDs only: no
    document of a kind the cluster does not serve, every other document the one rendered with all
    of CRD_KINDS (validated above) and valid in OLDEST's strict schema, and NOTES.txt saying which
    kinds were not created, claiming none of them, and otherwise the same as with them."""
    values_file = chart / "ci" / "all-features-values.yaml"
    full = served(OLDEST) + CRD_KINDS
    problems = []
    try:
        full_notes = render_notes(values_file, OLDEST, full)
    except RuntimeError as exc:
        return [f"NOTES.txt with {', '.join(CRD_KINDS)}: {exc}"]
    problems += notes_problems(full_notes, CRD_KINDS)
    (out / "all-features-values" / f"NOTES-kubernetes-{OLDEST}.txt").write_text(full_notes)
    cases = (
        ("no-crds", "serving none of the CRD kinds", []),
        ("prometheus-operator-only", "serving the Prometheus Operator's kinds only", PROMETHEUS_OPERATOR_KINDS),
    )
    for name, how, kinds in cases:
        label = f"Kubernetes {OLDEST} {how}"
        try:
            docs = lint_and_render(values_file, None, OLDEST, served(OLDEST) + kinds, lint=False)
            notes = render_notes(values_file, OLDEST, served(OLDEST) + kinds)
        except RuntimeError as exc:
            problems.append(f"{label}: {exc}")
            continue
        target = out / f"all-features-values-{name}"
        target.mkdir()
        (target / f"manifests-kubernetes-{OLDEST}.yaml").write_text(yaml.dump_all(docs, Dumper=DUMPER, sort_keys=False))
        (target / f"NOTES-kubernetes-{OLDEST}.txt").write_text(notes)
        absent = {api.rsplit("/", 1)[1] for api in CRD_KINDS if api not in kinds}
        found = [f"a {d['kind']} was rendered" for d in docs if d["kind"] in absent]
        expected = [d for d in with_crds if d["kind"] not in absent]
        differing = sorted(
            {(d["kind"], d["metadata"]["name"]) for d in docs if d not in expected and d["kind"] not in absent}
            | {(d["kind"], d["metadata"]["name"]) for d in expected if d not in docs}
        )
        found += [f"{kind}/{doc_name} differs from the rendering with the kinds" for kind, doc_name in differing]
        found += [p for d in docs if builtin(d) for p in schema_problems(d, OLDEST)]
        found += notes_problems(notes, kinds)
        if notes_without_crd_lines(notes) != notes_without_crd_lines(full_notes):
            found.append("NOTES.txt differs from the one rendered with the kinds beyond their lines")
        problems += [f"{label}: {p}" for p in found]
        if not found:
            print(
                f"render-helm: all-features-values for Kubernetes {OLDEST} {how}: "
                f"no {', '.join(sorted(absent))}; every other document as rendered with them and valid in "
                f"{'.'.join(OLDEST.split('.')[:2])}.0's strict schema; NOTES.txt says the "
                f"{', '.join(sorted(absent))} {'was' if len(absent) == 1 else 'were'} not created"
            )
    return problems


failed = False
renderings = {}  # label: the rendering for the oldest Kubernetes, with CRD_KINDS
for values_file in [None, *sorted((chart / "ci").glob("*-values.yaml"))]:
    label = values_file.stem if values_file else "defaults"
    values = None if values_file else KEYS
    try:
        docs = lint_and_render(values_file, values, api_versions=CRD_KINDS)
        oldest = lint_and_render(values_file, values, OLDEST, served(OLDEST) + CRD_KINDS)
    except RuntimeError as exc:
        print(f"render-helm: {label}: FAILED\n{exc}", file=sys.stderr)
        failed = True
        continue
    problems = validate(label, docs, os.environ["KUBE_VERSIONS"].split())
    present = {d["kind"] for d in docs}
    must, must_not = KINDS.get(label, (set(), set()))
    problems += [f"expected a {kind}" for kind in sorted(must - present)]
    problems += [f"expected no {kind}" for kind in sorted(must_not & present)]
    problems += oldest_problems(docs, oldest)
    if problems:
        print(f"render-helm: {label}: INVALID\n  " + "\n  ".join(problems), file=sys.stderr)
        failed = True
        continue
    target = out / label
    target.mkdir()
    (target / "manifests.yaml").write_text(yaml.dump_all(docs, Dumper=DUMPER, sort_keys=False))
    (target / f"manifests-kubernetes-{OLDEST}.yaml").write_text(yaml.dump_all(oldest, Dumper=DUMPER, sort_keys=False))
    configmaps = [d for d in docs if d["kind"] == "ConfigMap" and "gateway.yaml" in d.get("data", {})]
    if len(configmaps) != 1:
        print(f"render-helm: {label}: expected one ConfigMap with gateway.yaml, got {len(configmaps)}", file=sys.stderr)
        failed = True
        continue
    (target / "gateway.yaml").write_text(configmaps[0]["data"]["gateway.yaml"])
    renderings[label] = oldest
    kinds = ", ".join(sorted({d["kind"] for d in docs}))
    print(f"render-helm: {label}: lint, render and strict validation for {os.environ['KUBE_VERSIONS']} OK ({kinds})")
    versions = ", ".join(sorted({d["apiVersion"] for d in oldest if d["kind"] in (PDB, HPA)}))
    print(
        f"render-helm: {label}: for Kubernetes {OLDEST} ({versions or f'no {PDB} or {HPA}'}): lint, render and "
        f"strict validation for {'.'.join(OLDEST.split('.')[:2])}.0 OK"
    )

problems = version_matrix()
if problems:
    print("render-helm: API versions by Kubernetes version: INVALID\n  " + "\n  ".join(problems), file=sys.stderr)
    failed = True
else:
    print(
        f"render-helm: all-features-values for Kubernetes 1.{MATRIX_MINORS[0]} to 1.{MATRIX_MINORS[-1]}, from "
        f"discovery and from --kube-version alone: {PDB} policy/v1beta1 on 1.20, policy/v1 from 1.21; {HPA} "
        "autoscaling/v2beta2 until 1.22, autoscaling/v2 from 1.23; each valid in its version's strict schema"
    )

if "all-features-values" in renderings:
    problems = crd_kinds_not_served(renderings["all-features-values"])
    if problems:
        print("render-helm: CRD kinds the cluster does not serve: INVALID\n  " + "\n  ".join(problems), file=sys.stderr)
        failed = True

for label, (values, phrase, *options) in REFUSED.items():
    try:
        lint_and_render(None, values, **(options[0] if options else {}))
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
